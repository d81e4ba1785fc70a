import Foundation
import KindredArgon2
@testable import KindredAuth
import KindredChat
import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredPostgresTesting
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Logging
import Testing

typealias Chat = Kindred.Chat.V1
typealias ChatMethod = Kindred.Chat.V1.ChatService.Method

/// A real auth server and one or more chat servers sharing one chat database, all in-process on 127.0.0.1:0;
/// users are real accounts signed in through auth, events are delivered as their producers would (DeliverEvents
/// with the producer's service token).
struct ChatHarness {
    let auth: AuthServer
    let chats: [TestServer<ChatServerDefinition>]
    let clients: [GRPCClient]
    let community = "dogs"
    static let chatSecret = "chat-test-secret-0123456789abcdef0123"

    var chat: TestServer<ChatServerDefinition> { self.chats[0] }
    var client: GRPCClient { self.clients[0] }
    var database: PostgresClient { self.chats[0].server.database }

    struct User: Sendable {
        let id: String
        let token: String
        var metadata: Metadata { ["authorization": .string("Bearer " + self.token)] }
    }

    static func with<T>(
        servers: Int = 1,
        settings: [String: String] = [:],
        _ body: (ChatHarness) async throws -> T
    ) async throws -> T {
        let postgres = try await TestPostgres.shared()
        let root = TestServerSupport.repositoryRoot()
        var configuration = AuthConfiguration()
        configuration.database.url = try await postgres.createMigratedDatabase(
            schema: "auth", migrations: root + "/services/auth/migrations")
        configuration.database.poolSize = 4
        configuration.endpoint.listen = HostPort(host: "127.0.0.1", port: 0)
        configuration.endpoint.adminListen = nil
        configuration.dataDirectory = NSTemporaryDirectory() + "kindred-chat-test-\(UUID().uuidString)"
        configuration.smtpPort = 9
        configuration.smtpSecurity = "none"
        configuration.mailPollInterval = .seconds(60)
        configuration.hashThreads = 2
        configuration.argon2 = Argon2id.Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
        configuration.serviceSecrets["chat"] = Self.chatSecret
        defer { try? FileManager.default.removeItem(atPath: configuration.dataDirectory) }
        var logger = Logger(label: "kindred.chat.test")
        logger.logLevel = .error
        let auth = try AuthServer(configuration: configuration, logger: logger)
        let authRunning = try await auth.start()

        var chatSettings = [
            "KINDRED_CHAT_AUTH_ADDRESS": "127.0.0.1:\(authRunning.port)",
            "KINDRED_CHAT_SERVICE_SECRET": Self.chatSecret,
        ]
        chatSettings.merge(settings) { $1 }
        var chats: [TestServer<ChatServerDefinition>] = []
        var clients: [GRPCClient] = []
        let result: Result<T, any Error>
        do {
            let first = try await TestServer<ChatServerDefinition>.start(settings: chatSettings)
            chats.append(first)
            for _ in 1..<max(servers, 1) {
                // Replicas share the first one's database, as in production.
                var shared = chatSettings
                shared["KINDRED_CHAT_DATABASE_URL"] = first.settings["KINDRED_CHAT_DATABASE_URL"]
                chats.append(try await TestServer<ChatServerDefinition>.start(settings: shared))
            }
            for chat in chats {
                _ = await chat.server.waitUntilReady(timeout: .seconds(10))
                clients.append(chat.makeClient(logger: logger))
            }
            let harness = ChatHarness(auth: auth, chats: chats, clients: clients)
            result = .success(try await body(harness))
        } catch {
            result = .failure(error)
        }
        // Servers first: their drain ends open Subscribe streams, which closing a client would wait for.
        for chat in chats { await chat.stop() }
        for client in clients { await client.close() }
        await authRunning.stop()
        await auth.shutdown()
        return try result.get()
    }

    // MARK: Users and events

    /// An active account written into auth's database and signed in through auth.
    func user(_ prefix: String = "u", admin: Bool = false) async throws -> User {
        let name = prefix + "_" + UUID().uuidString.prefix(10).lowercased().replacingOccurrences(of: "-", with: "")
        let hash = try await self.auth.hasher.hash("correct horse battery")
        let id = try await self.auth.database.query(
            """
            INSERT INTO accounts (id, community_id, email, email_verified, username, password_hash, status, roles)
            VALUES (gen_random_uuid(), \(self.community), \(name + "@example.com"), true, \(name), \(hash), 'active',
                    \(admin ? ["user", "admin"] : ["user"]))
            RETURNING id::text
            """
        ).scalar(String.self)
        var request = Kindred.Auth.V1.SignInRequest()
        request.communityId = self.community
        request.login = name
        request.password = "correct horse battery"
        let authClient = GRPCClient(
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: self.authPort), logger: Logger(label: "t"))
        defer { Task { await authClient.close() } }
        let response = try await authClient.unary(Kindred.Auth.V1.AuthService.Method.signIn, request)
        return User(id: id, token: try #require(response.tokens).accessToken)
    }

    var authPort: Int {
        Int(self.chat.settings["KINDRED_CHAT_AUTH_ADDRESS"]!.split(separator: ":").last!)!
    }

    /// A token of a service (signed by auth's key, as IssueServiceToken would).
    func serviceMetadata(_ service: String) throws -> Metadata {
        ["authorization": .string("Bearer " + (try self.auth.service.signServiceToken(for: service)).token)]
    }

    /// Delivers events from `producer` the way its relay does; returns the acknowledged ids.
    @discardableResult
    func deliver(_ events: [Kindred.Common.V1.Event], from producer: String, server: Int = 0) async throws -> [String] {
        var request = Kindred.Common.V1.DeliverEventsRequest()
        request.events = events.map { event in
            var event = event
            event.producer = producer
            if event.eventId.isEmpty { event.eventId = try! UUIDv7.generate() }
            if event.occurredUnixMs == 0 { event.occurredUnixMs = Int64(Date().timeIntervalSince1970 * 1000) }
            return event
        }
        return try await self.clients[server].unary(
            ChatMethod.deliverEvents, request, metadata: try self.serviceMetadata(producer)
        ).acknowledgedEventIds
    }

    /// A MatchCreated event of match (thread) `matchID` between two users.
    func matchCreated(_ first: User, _ second: User, matchID: String = try! UUIDv7.generate()) -> Kindred.Common.V1.Event {
        var event = Kindred.Common.V1.Event()
        event.userId = first.id
        event.communityId = self.community
        var match = Kindred.Common.V1.MatchCreated()
        match.matchId = matchID
        match.userIds = [first.id, second.id].sorted()
        match.initiatorUserId = first.id
        match.mode = .mutual
        event.payload = .matchCreated(match)
        return event
    }

    /// Opens the thread of a new match between two users; returns its id.
    func thread(_ first: User, _ second: User) async throws -> String {
        let event = self.matchCreated(first, second)
        try await self.deliver([event], from: "match")
        guard case .matchCreated(let match)? = event.payload else { fatalError() }
        return match.matchId
    }

    // MARK: Calls

    @discardableResult
    func send(_ user: User, _ thread: String, _ body: String, id: String = UUID().uuidString, server: Int = 0)
        async throws -> Chat.SendMessageResponse
    {
        var request = Chat.SendMessageRequest()
        request.threadId = thread
        request.clientMessageId = id
        request.body = body
        return try await self.clients[server].unary(ChatMethod.sendMessage, request, metadata: user.metadata)
    }

    func history(
        _ user: User, _ thread: String, size: Int32 = 0, token: String = "", newer: Bool = false, from: Int64 = 0
    ) async throws -> Chat.HistoryResponse {
        var request = Chat.HistoryRequest()
        request.threadId = thread
        request.pageSize = size
        request.pageToken = token
        request.direction = newer ? .newer : .older
        request.fromSequence = from
        return try await self.client.unary(ChatMethod.history, request, metadata: user.metadata)
    }

    func threads(_ user: User) async throws -> [Chat.ChatThread] {
        try await self.client.unary(ChatMethod.listThreads, Chat.ListThreadsRequest(), metadata: user.metadata).threads
    }

    func footprint(_ user: User) async throws -> [String: Int64] {
        var request = Kindred.Common.V1.GetUserFootprintRequest()
        request.userId = user.id
        let response = try await self.client.unary(
            ChatMethod.getUserFootprint, request, metadata: try self.serviceMetadata("auth"))
        return Dictionary(uniqueKeysWithValues: response.counts.map { ($0.kind, $0.rows) })
    }
}

/// Collects a user's Subscribe stream in the background.
final class StreamRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var _events: [Chat.ChatEvent] = []
    private var _error: (any Error)?
    private var _ended = false
    private var task: Task<Void, Never>?

    var events: [Chat.ChatEvent] { self.lock.withLock { self._events } }
    var error: (any Error)? { self.lock.withLock { self._error } }
    var ended: Bool { self.lock.withLock { self._ended } }
    /// Events with a log position (messages, receipts, notices), without heartbeats and typing.
    var logged: [Chat.ChatEvent] { self.events.filter { !$0.resumeToken.isEmpty } }
    var messages: [Chat.ChatMessage] {
        self.events.compactMap { if case .message(let message)? = $0.event { message } else { nil } }
    }
    var heartbeats: Int { self.events.filter { if case .heartbeat? = $0.event { true } else { false } }.count }
    private var _released = false

    /// Lets a stream started with `stallAfterFirst` read again.
    func release() {
        self.lock.withLock { self._released = true }
    }

    /// Until the stream is live: past its catch-up, so every event committed from now on reaches it. Its first
    /// heartbeat says so (a harness with a short `KINDRED_CHAT_HEARTBEAT_MS`).
    func waitUntilLive(sourceLocation: SourceLocation = #_sourceLocation) async {
        await self.wait(sourceLocation: sourceLocation) { $0.heartbeats > 0 }
    }

    /// `stallAfterFirst`: stops reading after its first event until `release()` (at most 300 s).
    static func start(
        _ client: GRPCClient, _ user: ChatHarness.User, resumeToken: String = "", stallAfterFirst: Bool = false
    ) -> StreamRecorder {
        let recorder = StreamRecorder()
        var request = Chat.SubscribeRequest()
        request.resumeToken = resumeToken
        recorder.task = Task {
            do {
                try await client.serverStreaming(
                    ChatMethod.subscribe, request, metadata: user.metadata, options: CallOptions(timeout: .seconds(600))
                ) { stream in
                    var stall = stallAfterFirst
                    for try await response in stream {
                        if let event = response.event { recorder.lock.withLock { recorder._events.append(event) } }
                        if stall {
                            stall = false
                            let until = ContinuousClock.now + .seconds(300)
                            while !recorder.lock.withLock({ recorder._released }) && ContinuousClock.now < until {
                                try await Task.sleep(for: .milliseconds(20))
                            }
                        }
                    }
                }
            } catch {
                recorder.lock.withLock { recorder._error = error }
            }
            recorder.lock.withLock { recorder._ended = true }
        }
        return recorder
    }

    /// Waits until `condition` holds (at most `timeout`: generous, the machine running the tests may be busy).
    func wait(
        timeout: Duration = .seconds(120), sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: (StreamRecorder) -> Bool
    ) async {
        let deadline = ContinuousClock.now + timeout
        while !condition(self) {
            if ContinuousClock.now > deadline {
                Issue.record("stream condition not met in time", sourceLocation: sourceLocation)
                return
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    func cancel() async {
        self.task?.cancel()
        await self.task?.value
    }
}

/// Runs `body`, expecting an RPCError with `code` and (when given) the ErrorDetail `reason`; returns it.
@discardableResult
func expectRPCError(
    _ code: StatusCode, reason: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> RPCError? {
    do {
        try await body()
        Issue.record("expected \(code), the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, sourceLocation: sourceLocation)
        if let reason { #expect(error.errorDetail?.reason == reason, sourceLocation: sourceLocation) }
        return error
    } catch {
        Issue.record("expected RPCError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
