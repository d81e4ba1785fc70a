import ArgumentParser

/// The `kindred` command-line client (placeholder until the CLI lands).
public struct KindredCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(commandName: "kindred", abstract: "The Kindred command-line client.")
    public init() {}
    public func run() async throws {}
}
