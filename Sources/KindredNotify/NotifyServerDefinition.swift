import KindredGRPCServices
import KindredServiceKit
import Logging

/// The notify service as the generic server command runs it: `notify-server serve | migrate | healthcheck`,
/// settings from `KINDRED_NOTIFY_*` (services/notify/README.md).
public enum NotifyServerDefinition: ServerDefinition {
    public static let name = "notify"
    public static let summary = "The Kindred notify service: devices, notification settings and pushes."
    public static let defaultPort = 50056
    public static let schema: String? = "notify"

    public static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> NotifyServer {
        let server = try NotifyServer(configuration: NotifyConfiguration(settings), logger: logger)
        do {
            try await server.prepare(logger: logger)
        } catch {
            await server.shutdown()
            throw error
        }
        return server
    }
}
