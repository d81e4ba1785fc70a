import ArgumentParser
import KindredGRPCServices
import KindredServiceKit
import Logging

/// The profile service as the generic server command runs it: `profile-server serve | migrate | healthcheck |
/// communities install`, settings from `KINDRED_PROFILE_*` (services/profile/README.md).
public enum ProfileServerDefinition: ServerDefinition {
    public static let name = "profile"
    public static let summary = "The Kindred profile service: communities, profiles, location and photos."
    public static let defaultPort = 50052
    public static let schema: String? = "profile"
    public static var extraCommands: [any ParsableCommand.Type] { [CommunitiesCommand.self] }

    public static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> ProfileServer {
        try ProfileServer(configuration: ProfileConfiguration(settings), logger: logger)
    }
}

/// `profile-server communities install`: creates the four preset communities (dating, bizmatch, playdates,
/// fitness) that do not exist yet; existing ones are left as they are (idempotent). Needs only the database.
struct CommunitiesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "communities",
        abstract: "Manage communities from the operator's side.",
        subcommands: [InstallCommunitiesCommand.self]
    )
}

struct InstallCommunitiesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Create the preset communities dating, bizmatch, playdates and fitness (existing ones are kept)."
    )
    @OptionGroup var logging: ServerLoggingOptions

    func run() async throws {
        try await reportingConfigurationErrors {
            let logger = try self.logging.bootstrap(label: ProfileServerDefinition.loggerLabel)
            let settings = try ProfileServerDefinition.database(EnvironmentReader())!
            let database = try settings.makeClient(logger: logger)
            do {
                let created = try await CommunityService.install(CommunityPresets.all, database: database)
                await database.shutdown()
                print("communities created: \(created.isEmpty ? "none (all present)" : created.joined(separator: ", "))")
            } catch {
                await database.shutdown()
                print("communities install failed: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
