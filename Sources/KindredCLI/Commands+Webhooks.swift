import ArgumentParser
import KindredProto

private typealias AdminMethods = Kindred.Api.V1.AdminService.Method

/// `kindred admin webhooks [list | add | update | rotate | deliveries | replay | remove]`: the endpoints of the app
/// team's backend that hear about events, signed the Standard Webhooks way (served by notify).
struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Webhook endpoints of your backend: list, add, update, rotate a secret, deliveries, replay, remove.",
        subcommands: [List.self, Add.self, Update.self, Rotate.self, Deliveries.self, Replay.self, Remove.self],
        defaultSubcommand: List.self
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the endpoints, oldest first.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let endpoints = try await invocation.gateway.authenticated(AdminMethods.listWebhookEndpoints, .init())
                    .endpoints
                if endpoints.isEmpty { Console.out("no webhook endpoints") }
                for endpoint in endpoints { Console.out(WebhooksCommand.line(endpoint)) }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register an endpoint; prints its signing secret, shown only this once."
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "https://host/path (http:// only for the hosts the deployment allows).") var url: String
        @Option(help: "Comma-separated event types: match.created, match.ended, account.deactivated, …")
        var events: String
        @Option(help: "A note for other operators.") var description = ""

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    AdminMethods.createWebhookEndpoint,
                    .with {
                        $0.url = self.url
                        $0.eventTypes = WebhooksCommand.list(self.events)
                        $0.description = self.description
                    }
                )
                if let endpoint = response.endpoint { Console.out(WebhooksCommand.line(endpoint)) }
                Console.out("secret: \(response.secret)  (shown only now: keep it in your backend's settings)")
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change an endpoint's URL, events or state.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint id.") var endpoint: String
        @Option(help: "A new URL.") var url: String?
        @Option(help: "New comma-separated event types.") var events: String?
        @Option(help: "on or off.") var enabled: String?

        func validate() throws {
            guard self.url != nil || self.events != nil || self.enabled != nil else {
                throw ValidationError("Give --url, --events or --enabled")
            }
            guard self.enabled == nil || ["on", "off"].contains(self.enabled!) else {
                throw ValidationError("--enabled is on or off")
            }
        }

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    AdminMethods.updateWebhookEndpoint,
                    .with {
                        $0.endpointId = self.endpoint
                        if let url = self.url { $0.url = url; $0.updatePaths.append("url") }
                        if let events = self.events {
                            $0.eventTypes = WebhooksCommand.list(events)
                            $0.updatePaths.append("event_types")
                        }
                        if let enabled = self.enabled { $0.enabled = enabled == "on"; $0.updatePaths.append("enabled") }
                    }
                )
                if let endpoint = response.endpoint { Console.out(WebhooksCommand.line(endpoint)) }
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new signing secret; the old one keeps signing alongside it for the grace period."
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint id.") var endpoint: String

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    AdminMethods.rotateWebhookSecret,
                    .with { $0.endpointId = self.endpoint }
                )
                Console.out("secret: \(response.secret)  (shown only now)")
                Console.out(
                    "the previous secret signs too until \(Render.time(response.endpoint?.previousSecretExpiresUnixMs ?? 0))"
                )
            }
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "An endpoint's deliveries, newest first.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint id.") var endpoint: String
        @Option(help: "pending, delivered or failed.") var state: String?
        @Option(help: "How many, 1..100.") var limit: Int32 = 20

        static let states: [String: Kindred.Api.V1.WebhookDeliveryState] = [
            "pending": .pending, "delivered": .delivered, "failed": .failed,
        ]

        func validate() throws {
            guard self.state == nil || Self.states[self.state!] != nil else {
                throw ValidationError("--state is pending, delivered or failed")
            }
            guard (1...100).contains(self.limit) else { throw ValidationError("--limit is 1..100") }
        }

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let deliveries = try await invocation.gateway.authenticated(
                    AdminMethods.listWebhookDeliveries,
                    .with {
                        $0.endpointId = self.endpoint
                        $0.state = self.state.flatMap { Self.states[$0] } ?? .unspecified
                        $0.pageSize = self.limit
                    }
                ).deliveries
                if deliveries.isEmpty { Console.out("no deliveries") }
                for delivery in deliveries {
                    let state = Self.states.first { $0.value == delivery.state }?.key ?? "unknown"
                    Console.out(
                        "\(delivery.deliveryId)  \(delivery.eventType)  \(state)  attempts \(delivery.attempts)  "
                            + "\(Render.time(delivery.createdUnixMs))"
                            + (delivery.lastError.isEmpty ? "" : "  last error: \(delivery.lastError)")
                    )
                }
            }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Queue a delivery again, with the same webhook-id.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The delivery id.") var delivery: String

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                _ = try await invocation.gateway.authenticated(
                    AdminMethods.replayWebhookDelivery,
                    .with { $0.deliveryId = self.delivery }
                )
                Console.out("Delivery \(self.delivery) queued again.")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an endpoint and its deliveries.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint id.") var endpoint: String

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let removed = try await invocation.gateway.authenticated(
                    AdminMethods.deleteWebhookEndpoint,
                    .with { $0.endpointId = self.endpoint }
                ).removed
                Console.out(removed ? "Endpoint \(self.endpoint) removed." : "No endpoint \(self.endpoint).")
            }
        }
    }

    static func list(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static func line(_ endpoint: Kindred.Api.V1.WebhookEndpoint) -> String {
        let state = endpoint.enabled ? "on" : endpoint.disabledReason == "GONE" ? "off (gone: 410)" : "off"
        return "\(endpoint.endpointId)  \(endpoint.url)  \(endpoint.eventTypes.joined(separator: ","))  \(state)"
    }
}
