import ArgumentParser

/// `kindred admin …`: what the admin role can do (each service's commands live beside its other commands:
/// communities in Commands+Profile.swift, reports in Commands+Match.swift, webhooks in Commands+Webhooks.swift, the
/// demo seed in Commands+Seed.swift).
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Administration (the admin role).",
        subcommands: [Community.self, ReportsCommand.self, WebhooksCommand.self, Seed.self]
    )
}
