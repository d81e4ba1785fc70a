import NIOConcurrencyHelpers
import NIOPosix

/// Runs the photo pipeline (synchronous CPU work) on its own threads, never on the event loops: at most `threads`
/// photos are processed at once and at most `maxQueued` more wait; beyond that an upload is refused as busy, so
/// eight concurrent uploads neither starve the server's loops nor pile up memory.
final class PhotoWorkers: Sendable {
    private let pool: NIOThreadPool
    private let maxQueued: Int
    private let inFlight = NIOLockedValueBox(0)

    init(threads: Int, maxQueued: Int) {
        self.pool = NIOThreadPool(numberOfThreads: threads)
        self.pool.start()
        self.maxQueued = threads + maxQueued
    }

    /// Runs `body` on a worker thread; nil when too many jobs are already waiting.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T? {
        let admitted = self.inFlight.withLockedValue { count in
            guard count < self.maxQueued else { return false }
            count += 1
            return true
        }
        guard admitted else { return nil }
        defer { self.inFlight.withLockedValue { $0 -= 1 } }
        return try await self.pool.runIfActive(body)
    }

    func shutdown() async {
        try? await self.pool.shutdownGracefully()
    }
}
