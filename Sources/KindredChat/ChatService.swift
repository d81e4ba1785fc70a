import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

typealias Chat = Kindred.Chat.V1

/// `kindred.chat.v1.ChatService`: threads, messages, receipts, typing and live event streams. Handlers only
/// await: SQL goes through the libpq pool; live delivery through the hub.
///
/// Ownership is checked on every id: a thread is found only together with the caller as a participant, so an
/// id of someone else's thread and an unknown id get the same NOT_FOUND.
public final class ChatService: GRPCService, Sendable {
    let configuration: ChatConfiguration
    let database: PostgresClient
    let authenticator: CallerAuthenticator
    /// Who is calling and what they may do (the kit's one caller check).
    let access: ServiceAccess
    let inbox: EventInbox
    /// Live streams of this server.
    public let hub: ChatEventHub
    let typingLimiter: TokenBucketLimiter
    let logger: Logger
    /// Integrity key of page tokens: random per process (a token from another replica or an earlier run only
    /// sends the client back to the first page).
    let pageTokenKey: [UInt8]
    /// The SQL, one store per aggregate.
    let threads = ThreadStore()
    let messages = MessageStore()
    let footprint = FootprintStore()
    let users = UserStore()
    let log = EventLogStore()
    let communities = CommunityStore()
    /// Chat's events (MessageSent, for notify), written in the transaction of the change.
    let outbox = Outbox(producer: "chat")
    /// Who has a live Subscribe stream, on any replica.
    let presence: ChatPresence

    public init(
        configuration: ChatConfiguration, database: PostgresClient, authenticator: CallerAuthenticator,
        hub: ChatEventHub, logger: Logger
    ) {
        self.configuration = configuration
        self.database = database
        self.authenticator = authenticator
        self.access = ServiceAccess(authenticator: authenticator)
        self.inbox = EventInbox(database: database, logger: logger)
        self.hub = hub
        self.typingLimiter = TokenBucketLimiter(rate: Double(configuration.typingPerMinute) / 60, burst: 5)
        self.logger = logger
        self.pageTokenKey = PageToken.key(service: "chat", secret: configuration.auth.serviceSecret)
        self.presence = ChatPresence(database: database, interval: configuration.heartbeatInterval, logger: logger)
    }

    /// Routes call the handlers directly: errors are mapped once, by the runtime (`ChatError`, `PostgresError`).
    public func register(in router: inout GRPCRouter) {
        typealias M = Chat.ChatService.Method
        router.unary(M.openThread) { try await self.openThread($0, $1) }
        router.unary(M.closeThread) { try await self.closeThread($0, $1) }
        router.unary(M.listThreads) { try await self.listThreads($0, $1) }
        router.unary(M.getThreadSummaries) { try await self.getThreadSummaries($0, $1) }
        router.unary(M.sendMessage) { try await self.sendMessage($0, $1) }
        router.unary(M.history) { try await self.history($0, $1) }
        router.unary(M.markRead) { try await self.markRead($0, $1) }
        router.unary(M.markDelivered) { try await self.markDelivered($0, $1) }
        router.unary(M.getUnreadCount) { try await self.getUnreadCount($0, $1) }
        router.unary(M.sendTyping) { try await self.sendTyping($0, $1) }
        router.unary(M.getChatSettings) { try await self.getChatSettings($0, $1) }
        router.unary(M.updateChatSettings) { try await self.updateChatSettings($0, $1) }
        router.unary(M.getMessages) { try await self.getMessages($0, $1) }
        router.unary(M.getNotificationContext) { try await self.getNotificationContext($0, $1) }
        router.unary(M.getNotificationContexts) { try await self.getNotificationContexts($0, $1) }
        router.unary(M.deliverEvents) { try await self.deliverEvents($0, $1) }
        router.unary(M.getUserFootprint) { try await self.getUserFootprint($0, $1) }
        router.serverStreaming(M.subscribe) { request, writer, context in
            try await self.subscribe(request, writer, context)
        }
    }

    /// The thread if `user` takes part in it and the policy lets them see it (``VisibilityPolicy``: `thread`,
    /// or `message` for writes): open, neither participant deactivated. Anything else, an ended thread included
    /// whoever ended it and why, answers NOT_FOUND exactly as an unknown id.
    func readableThread(
        _ threadID: String, for user: String, lock: Bool = false, to action: MemberAction? = nil,
        in runner: some SQLRunner
    ) async throws -> ThreadRecord {
        guard let thread = try await self.threads.find(threadID, for: user, lock: lock, in: runner) else {
            throw ChatError.threadNotFound
        }
        try Self.require(thread, to: action)
        return thread
    }

    /// Refuses a thread the policy does not let its participant see (or, with `action`, act on) as unknown.
    static func require(_ thread: ThreadRecord, to action: MemberAction? = nil) throws {
        let allowed =
            action.map { VisibilityPolicy.allows($0, thread.relation) }
            ?? VisibilityPolicy.allows(.thread, thread.relation)
        guard allowed else { throw ChatError.threadNotFound }
    }

    /// Now, in UTC milliseconds.
    static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Events of the log start from this.
    static func event(_ body: Chat.ChatEvent.Event, at occurred: Int64 = ChatService.nowMs()) -> Chat.ChatEvent {
        var event = Chat.ChatEvent()
        event.occurredUnixMs = occurred
        event.event = body
        return event
    }

    /// Deletes old event-log entries and inbox ids, hourly, until cancelled.
    func housekeeping() async {
        while !Task.isCancelled {
            do {
                try await self.log.purge(olderThanSeconds: self.configuration.eventRetentionSeconds, in: self.database)
                try await self.inbox.purge()
                try await self.presence.purge()
            } catch {
                self.logger.warning("chat housekeeping failed", metadata: ["error.type": "\(type(of: error))"])
            }
            try? await Task.sleep(for: .seconds(3600))
        }
    }
}
