import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredProto
import Logging

/// Chat's `GetNotificationContext`, asked by the sender just before a push, with notify's service token and a
/// deadline of its own. Asking at the push rather than reading a flag in MessageSent (computed at the message's
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

    /// nil when chat cannot answer: the push then goes out without presence, badge or text.
    func context(of user: String, thread: String?, bodyOf message: String?) async -> ChatContext? {
        var request = Kindred.Chat.V1.GetNotificationContextRequest()
        request.userId = user
        request.threadId = thread ?? ""
        request.messageId = message ?? ""
        do {
            let token = try await self.tokens.token()
            let response = try await self.client.unary(
                Kindred.Chat.V1.ChatService.Method.getNotificationContext, request,
                metadata: ["authorization": .string("Bearer " + token)], options: CallOptions(timeout: self.timeout))
            return ChatContext(
                online: response.online, unreadMessages: Int(response.unreadMessages), threadOpen: response.threadOpen,
                messageBody: response.messageBody.isEmpty ? nil : response.messageBody)
        } catch {
            self.logger.warning("notify sender: chat's notification context failed", metadata: ["error": "\(error)"])
            return nil
        }
    }

    func close() async { await self.client.close() }
}
