import ArgumentParser
import KindredGRPCServices

/// `healthcheck`: exit 0 when the server is SERVING (compose and the native cluster run it).
public struct HealthcheckCommand<Server: ServerDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "healthcheck",
            abstract: "Exit 0 when the server at KINDRED_\(Server.name.uppercased())_LISTEN is SERVING."
        )
    }

    public init() {}

    public func run() async throws {
        try await reportingConfigurationErrors {
            guard try await Server.endpoint(EnvironmentReader()).probe() else {
                print("NOT SERVING")
                throw ExitCode.failure
            }
            print("SERVING")
        }
    }
}
