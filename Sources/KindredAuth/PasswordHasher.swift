import KindredArgon2
import NIOConcurrencyHelpers
import NIOPosix

/// Argon2id off the event loops: a dedicated thread pool whose size caps concurrent hashes (each one takes
/// ~19 MiB and ~20 ms of a core at OWASP parameters). Calls queue when every thread is busy.
public final class PasswordHasher: Sendable {
    let argon2: Argon2id
    private let pool: NIOThreadPool
    /// A hash of a random password with the current parameters: verified against when the account does not
    /// exist, so an unknown login costs the same as a wrong password.
    private let dummyHash: String
    private let counter = NIOLockedValueBox(0)

    /// Argon2 computations done so far (hashes and verifications): the unit of work that dominates the time of
    /// sign-up and sign-in, so equal counts on two paths mean indistinguishable timing.
    public var computations: Int { self.counter.withLockedValue { $0 } }

    public init(parameters: Argon2id.Parameters, threads: Int) throws {
        self.argon2 = Argon2id(parameters: parameters)
        self.pool = NIOThreadPool(numberOfThreads: max(1, threads))
        self.pool.start()
        self.dummyHash = try self.argon2.hash(password: "kindred-dummy-password-\(UInt64.random(in: 0...UInt64.max))")
    }

    public func hash(_ password: String) async throws -> String {
        let argon2 = self.argon2
        self.counter.withLockedValue { $0 += 1 }
        return try await self.pool.runIfActive { try argon2.hash(password: password) }
    }

    /// Verifies `password` against `encoded`, or against the dummy hash when there is no account.
    public func verify(_ password: String, encoded: String?) async throws -> Bool {
        let argon2 = self.argon2
        let target = encoded ?? self.dummyHash
        self.counter.withLockedValue { $0 += 1 }
        let matches = try await self.pool.runIfActive {
            (try? argon2.verify(password: password, encoded: target)) ?? false
        }
        return encoded != nil && matches
    }

    public func needsRehash(_ encoded: String) -> Bool {
        (try? self.argon2.needsRehash(encoded: encoded)) ?? true
    }

    public func shutdown() async {
        try? await self.pool.shutdownGracefully()
    }
}
