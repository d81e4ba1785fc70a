import ArgumentParser

/// `kindred-load`: the benchmark drivers that go through the gateway. `swipes` (the default, so
/// Tests/Benchmarks/match-swipes.sh's plain options keep working), `mixed` and `deck` (GetDeck at discovery).
@main
struct KindredLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kindred-load", abstract: "Load drivers through the gateway (benchmarks).",
        subcommands: [LoadCommand.self, MixedCommand.self, DeckCommand.self], defaultSubcommand: LoadCommand.self)
}
