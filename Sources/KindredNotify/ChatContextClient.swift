import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredProto
import Logging

/// Chat's `GetNotificationContexts`, asked by the sender about a claimed batch just before its pushes, with notify's
/// service token and a deadline of its own. Asking at the push rather than reading a flag in MessageSent (computed at the message's
/// commit) answers for the moment the member would be disturbed, from every chat replica's streams, and keeps
/// message bodies in chat: the body travels only when the member shows message text, straight into the push.
final class ChatContextClient: Sendable {
    let client: GRPCClient
    let tokens: ServiceTokenSource
    let timeout: Duration
    let logger: Logger

    init(address: ServiceAddress, tokens: ServiceTokenSource, timeout: Duration = .seconds(2), logger: Logger) {
        var configuration = GRPCClientConfiguration(address: address)
        configuration.defaultTimeout = timeout
        configuration.connectTimeout = timeout
        self.client = GRPCClient(configuration: configuration, logger: logger)
        self.tokens = tokens
        self.timeout = timeout
        self.logger = logger
    }

    /// The contexts of `asks` in one call (`GetNotificationContexts`), in their order; nil when chat cannot answer: the
    /// pushes then go out without presence, badge or text.
    func contexts(of asks: [ChatContextAsk]) async -> [ChatContext]? {
        var request = Kindred.Chat.V1.GetNotificationContextsRequest()
        request.requests = asks.map(Self.request)
        do {
            let token = try await self.tokens.token()
            let response = try await self.client.unary(
                Kindred.Chat.V1.ChatService.Method.getNotificationContexts, request,
                metadata: ["authorization": .string("Bearer " + token)], options: CallOptions(timeout: self.timeout))
            guard response.contexts.count == asks.count else {
                self.logger.warning("notify sender: chat answered \(response.contexts.count) contexts for \(asks.count)")
                return nil
            }
            return response.contexts.map(Self.context)
        } catch {
            self.logger.warning("notify sender: chat's notification contexts failed", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// At most this many asks per call (chat's limit).
    static let maxBatch = 256

    private static func request(_ ask: ChatContextAsk) -> Kindred.Chat.V1.GetNotificationContextRequest {
        var request = Kindred.Chat.V1.GetNotificationContextRequest()
        request.userId = ask.user
        request.threadId = ask.thread ?? ""
        request.messageId = ask.bodyOf ?? ""
        return request
    }

    private static func context(_ response: Kindred.Chat.V1.GetNotificationContextResponse) -> ChatContext {
        ChatContext(
            online: response.online, unreadMessages: Int(response.unreadMessages), threadOpen: response.threadOpen,
            messageBody: response.messageBody.isEmpty ? nil : response.messageBody)
    }

    func close() async { await self.client.close() }
}
