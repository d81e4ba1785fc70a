import Foundation
import Logging
import Synchronization
import KindredAuth
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredPostgres
import KindredProfile
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

typealias P = Kindred.Profile.V1.ProfileService.Method
typealias C = Kindred.Profile.V1.CommunityService.Method
typealias V1 = Kindred.Profile.V1

/// The profile server with a card check of the tests' own (`FakeCardCheck`: these tests are about profile's own
/// rules; the cluster tests ask the real discovery).
enum TestProfileDefinition: ServerDefinition {
    static let name = "profile"
    static let summary = "profile (tests)"
    static let defaultPort = ProfileServerDefinition.defaultPort
    static let schema: String? = ProfileServerDefinition.schema

    static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> ProfileServer {
        try ProfileServer(configuration: ProfileConfiguration(settings), cardCheck: FakeCardCheck(), logger: logger)
    }
}

/// Discovery's card check as the tests set it, per viewer (user ids are random, so parallel tests do not meet):
/// everyone is within preferences unless `outside` lists them for the viewer; `unavailable` viewers get
/// UNAVAILABLE; `calls` counts the checks each viewer caused.
struct FakeCardCheck: CandidateCheck {
    struct State {
        var outside: [String: Set<String>] = [:]
        var unavailable: Set<String> = []
        var calls: [String: Int] = [:]
    }
    static let state = Mutex(State())

    func shown(_ targets: [String], to viewer: String) async throws -> Set<String> {
        let (outside, unavailable) = Self.state.withLock { state in
            state.calls[viewer, default: 0] += 1
            return (state.outside[viewer] ?? [], state.unavailable.contains(viewer))
        }
        if unavailable { throw ProfileError(.unavailable, "UNAVAILABLE", "no discovery") }
        return Set(targets.filter { !outside.contains($0) })
    }
}

/// A real auth server (for keys, session ends and service tokens) and a real profile server on their own databases,
/// the four preset communities installed, and tokens minted with auth's signing key for any user, admin or service.
struct ProfileHarness {
    let auth: TestServer<AuthServerDefinition>
    let profile: TestServer<TestProfileDefinition>
    let client: GRPCClient
    let signer: AccessTokenSigner
    let photoDirectory: String?

    static let secret = String(repeating: "p", count: 40)
    static let locationKey = "profile-test-location-key-0123456789abcdef"

    static func with<T>(
        settings: [String: String] = [:],
        _ body: (ProfileHarness) async throws -> T
    ) async throws -> T {
        let keyFile = NSTemporaryDirectory() + "kindred-profile-test-key-\(UUID().uuidString).pem"
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        let auth = try await TestServer<AuthServerDefinition>.start(settings: [
            "KINDRED_AUTH_SMTP_PORT": "9", "KINDRED_AUTH_SIGNING_KEY_FILE": keyFile,
            "KINDRED_AUTH_SERVICE_SECRET_PROFILE": Self.secret, "KINDRED_AUTH_HASH_THREADS": "1",
        ])
        var profileSettings = [
            "KINDRED_PROFILE_AUTH_ADDRESS": "127.0.0.1:\(auth.port)", "KINDRED_PROFILE_SERVICE_SECRET": Self.secret,
            "KINDRED_PROFILE_LOCATION_INTERVAL_MS": "1000", "KINDRED_PROFILE_PHOTO_WORKERS": "2",
            "KINDRED_LOCATION_KEY": Self.locationKey,
            // Trusts the set of ended sessions for 30 s without news from auth (5 s by default): on a loaded
            // machine, a long test's calls were refused as "session checks unavailable" when the feed's
            // heartbeat came late. Session ends themselves still arrive at once.
            "KINDRED_PROFILE_REVOCATION_STALE_MS": "30000",
        ]
        profileSettings.merge(settings) { $1 }
        let profile: TestServer<TestProfileDefinition>
        do {
            profile = try await TestServer<TestProfileDefinition>.start(settings: profileSettings)
        } catch {
            await auth.stop()
            throw error
        }
        let key = try SigningKey.loadOrCreate(path: keyFile)
        let harness = ProfileHarness(
            auth: auth, profile: profile, client: profile.makeClient(),
            signer: AccessTokenSigner(keyID: key.keyID, key: key.privateKey),
            photoDirectory: settings["KINDRED_PROFILE_PHOTO_DIR"])
        do {
            #expect(await profile.server.waitUntilReady(timeout: .seconds(10)))
            _ = try await CommunityService.install(CommunityPresets.all, database: profile.server.database)
            let result = try await body(harness)
            await harness.stop()
            return result
        } catch {
            await harness.stop()
            throw error
        }
    }

    func stop() async {
        await self.client.close()
        await self.profile.stop()
        await self.auth.stop()
    }

    /// `authorization` metadata for a user of `community` (a new user id unless given).
    func user(_ community: String = "dating", id: String = UUID().uuidString.lowercased(), admin: Bool = false) -> User {
        let now = Int64(Date().timeIntervalSince1970)
        let claims = AccessTokenClaims(
            subject: id, issuedAt: now, lifetimeSeconds: 900, tokenID: UUID().uuidString,
            sessionID: UUID().uuidString, communityID: community, roles: admin ? ["user", "admin"] : ["user"])
        return User(id: id, community: community, metadata: ["authorization": .string("Bearer \(try! self.signer.sign(claims))")])
    }

    /// `authorization` metadata of a service token.
    func service(_ name: String) -> Metadata {
        let now = Int64(Date().timeIntervalSince1970)
        let claims = AccessTokenClaims(
            subject: "service:\(name)", issuedAt: now, lifetimeSeconds: 900, tokenID: UUID().uuidString,
            sessionID: nil, roles: ["service"])
        return ["authorization": .string("Bearer \(try! self.signer.sign(claims))")]
    }

    struct User {
        let id: String
        let community: String
        let metadata: Metadata
    }

    var database: PostgresClient { self.profile.server.database }

    // MARK: Shortcuts

    static func date(_ year: Int32, _ month: Int32 = 1, _ day: Int32 = 1) -> Kindred.Common.V1.CalendarDate {
        .with {
            $0.year = year
            $0.month = month
            $0.day = day
        }
    }

    static func fields(_ name: String = "Ada", born: Int32 = 1990) -> V1.ProfileFields {
        .with {
            $0.displayName = name
            $0.birthDate = Self.date(born, 5, 17)
        }
    }

    @discardableResult
    func createProfile(_ user: User, _ fields: V1.ProfileFields = ProfileHarness.fields()) async throws -> V1.Profile {
        try await self.client.unary(P.createProfile, .with { $0.fields = fields }, metadata: user.metadata).profile!
    }

    /// A complete dating profile that meets every requirement but photos (dating needs 2).
    func datingFields(_ name: String) -> V1.ProfileFields {
        var fields = Self.fields(name)
        fields.gender = .woman
        fields.interestedIn = [.man, .woman]
        fields.bio = "Hi"
        return fields
    }

    /// Inserts photo rows directly (tests that are not about the pipeline), so that a profile can be eligible.
    func addPhotoRows(_ userID: String, count: Int) async throws {
        for index in 0..<count {
            let id = try UUIDv7.generate()
            try await self.database.execute(
                """
                INSERT INTO photos (id, user_id, position, content_hash, width, height)
                VALUES (\(id)::uuid, \(userID), \(Int32(index)), \([UInt8](repeating: 1, count: 32)), 1080, 1350)
                """)
        }
    }

    /// The event types the outbox holds for a partition, oldest first.
    func outboxTypes(_ partition: String) async throws -> [String] {
        let rows = try await self.database.query(
            "SELECT event_type FROM events_outbox WHERE partition_key = \(partition) ORDER BY sequence")
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    func footprint(_ userID: String) async throws -> [String: Int64] {
        let response = try await self.client.unary(
            P.getUserFootprint, .with { $0.userId = userID }, metadata: self.service("auth"))
        return Dictionary(uniqueKeysWithValues: response.counts.map { ($0.kind, $0.rows) })
    }
}

/// The status code of a failed call (nil when it succeeded).
func statusCode(_ body: () async throws -> Void) async -> StatusCode? {
    do {
        try await body()
        return nil
    } catch let error as RPCError {
        return error.code
    } catch {
        return .unknown
    }
}

/// The ErrorDetail reason of a failed call.
func failureReason(_ body: () async throws -> Void) async -> String? {
    do {
        try await body()
        return nil
    } catch let error as RPCError {
        return error.errorDetail?.reason
    } catch {
        return "\(error)"
    }
}
