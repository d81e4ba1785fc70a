import ArgumentParser
import KindredGRPCServices
import Logging

/// `serve`: the gRPC API, the admin port and the server's background loops.
public struct ServeCommand<Server: ServerDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "serve", abstract: "Serve the \(Server.name) gRPC API until SIGTERM or SIGINT.")
    }
    @OptionGroup var logging: ServerLoggingOptions

    public init() {}

    public func run() async throws {
        ProcessMemory.returnLargeBlocksWhenFreed()
        try await reportingConfigurationErrors {
            let logger = try self.logging.bootstrap(label: Server.loggerLabel)
            try await Server.serve(settings: EnvironmentReader(), logger: logger)
        }
    }
}
