import KindredGRPCServices
import KindredServiceKit
import Logging

/// The chat service as the generic server command runs it: `chat-server serve | migrate | healthcheck`, settings
/// from `KINDRED_CHAT_*` (services/chat/README.md).
public enum ChatServerDefinition: ServerDefinition {
    public static let name = "chat"
    public static let summary = "The Kindred chat service: threads, messages, receipts and live event streams."
    public static let defaultPort = 50055
    public static let schema: String? = "chat"

    public static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> ChatServer {
        try ChatServer(configuration: ChatConfiguration(settings), logger: logger)
    }
}
