import ArgumentParser
import Foundation
import KindredGRPC
import KindredProto

private typealias ActivityAPI = Kindred.Api.V1.ActivityService.Method

/// `kindred workout start [--activity NAME]` and `kindred workout stop`: tell the members who follow you that you
/// are working out now (follow communities).
struct WorkoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "workout",
        abstract: "Tell your followers you are working out now, or stop.",
        subcommands: [Start.self, Stop.self]
    )

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a broadcast: your followers see it in Home and get a push (at most once every few hours)."
        )
        @OptionGroup var global: GlobalOptions
        @Option(help: "One of your community's activities, e.g. running (see `kindred community`).") var activity:
            String = ""

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    ActivityAPI.startActivity,
                    .with {
                        $0.activity = self.activity
                        $0.idempotencyKey = UUID().uuidString
                    }
                )
                let broadcast = response.broadcast ?? .init()
                let what = broadcast.activity.isEmpty ? "Working out" : "Working out (\(broadcast.activity))"
                Console.out("\(what) until \(Render.time(broadcast.expiresUnixMs)).")
                Console.out(
                    response.followersNotified
                        ? "Your followers are being told."
                        : "Your followers were told recently; they see it in Home, the next push can go at "
                            + "\(Render.time(response.nextNotifyUnixMs))."
                )
            }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop your broadcast.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(ActivityAPI.stopActivity, .init())
                Console.out(response.broadcastId.isEmpty ? "No broadcast was on." : "Stopped.")
            }
        }
    }
}
