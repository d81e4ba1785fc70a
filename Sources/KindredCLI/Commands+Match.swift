import ArgumentParser
import Foundation
import KindredGRPC
import KindredProto

// Swiping, matches, likes, blocks and reports (kindred.api.v1 DeckService and MatchService), and report
// moderation for admins. USER is always a user id (36-character UUID), as the gateway's contracts name people:
// ids come from `kindred matches`, `kindred likes` and the deck.

private typealias Deck = Kindred.Api.V1.DeckService.Method
private typealias Matches = Kindred.Api.V1.MatchService.Method
private typealias AdminMethods = Kindred.Api.V1.AdminService.Method

/// `kindred like USER` / `kindred pass USER`: one swipe.
struct Like: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "like", abstract: "Like a member (mutual communities: a match when they like you back).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member's user id.") var user: String

    func run() async throws { try await swipe(self.global, self.user, .like) }
}

struct Pass: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pass", abstract: "Pass on a member (private; `kindred undo` takes back the last pass).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member's user id.") var user: String

    func run() async throws { try await swipe(self.global, self.user, .pass) }
}

private func swipe(_ global: GlobalOptions, _ user: String, _ action: Kindred.Common.V1.SwipeAction) async throws {
    try await Invocation.run(global) { invocation in
        let response = try await invocation.gateway.authenticated(
            Deck.swipe,
            .with {
                $0.targetUserId = user
                $0.action = action
                $0.surface = "cli"
            })
        Console.out(MatchRender.swipe(response))
    }
}

/// `kindred undo`: takes back the last pass.
struct Undo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "undo", abstract: "Take back your last pass.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(Deck.undoPass, .init())
            Console.out(
                "Undid the pass on \(response.card?.profile?.userId ?? "?") (\(response.remainingUndos) undos left today).")
        }
    }
}

/// `kindred matches`: the first page of matches and connections.
struct ListMatchesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "matches", abstract: "List your matches, newest first.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Page size, 1..100.") var limit: Int32 = 20

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(Matches.listMatches, .with { $0.pageSize = self.limit })
            MatchRender.matches(response.matches).forEach(Console.out)
        }
    }
}

/// `kindred likes`: who liked you (and you have not swiped yet).
struct Likes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "likes", abstract: "List the members who liked you.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Page size, 1..100.") var limit: Int32 = 20

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(
                Matches.listLikesReceived, .with { $0.pageSize = self.limit })
            Console.out("\(response.totalCount) pending like\(response.totalCount == 1 ? "" : "s")")
            for like in response.likes {
                Console.out("\(like.userId)  \(like.profile?.displayName ?? "")  \(Render.time(like.likedUnixMs))")
            }
        }
    }
}

/// `kindred unmatch USER`: ends the match with that member (looked up in your matches).
struct Unmatch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmatch", abstract: "End your match or connection with a member.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member's user id.") var user: String

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            var token = ""
            repeat {
                let page = try await invocation.gateway.authenticated(
                    Matches.listMatches,
                    .with {
                        $0.pageSize = 100
                        $0.pageToken = token
                    })
                if let match = page.matches.first(where: { $0.profile?.userId == self.user }) {
                    _ = try await invocation.gateway.authenticated(Matches.unmatch, .with { $0.matchId = match.matchId })
                    Console.out("Unmatched \(self.user).")
                    return
                }
                token = page.nextPageToken
            } while !token.isEmpty
            throw RPCError(.notFound, "No match with this member")
        }
    }
}

/// `kindred block USER` / `kindred unblock USER`.
struct Block: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "block", abstract: "Block a member: you disappear from each other everywhere, at once.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member's user id.") var user: String

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(Matches.block, .with { $0.targetUserId = self.user })
            Console.out("Blocked \(self.user)." + (response.endedMatchId.isEmpty ? "" : " Your match ended."))
        }
    }
}

struct Unblock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unblock", abstract: "Lift your block on a member (a match does not come back).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member's user id.") var user: String

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            _ = try await invocation.gateway.authenticated(Matches.unblock, .with { $0.targetUserId = self.user })
            Console.out("Unblocked \(self.user).")
        }
    }
}

/// `kindred report USER --reason REASON [--details TEXT] [--block]`.
struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report", abstract: "Report a member to the moderators (they are never told).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The member's user id.") var user: String
    @Option(help: "spam, inappropriate-content, harassment, fake-profile, underage, scam, offline-behaviour or other.")
    var reason: String
    @Option(help: "Explanation (required for other), up to 1000 characters.") var details = ""
    @Flag(help: "Also block the member.") var block = false

    func validate() throws {
        guard MatchRender.reasons[self.reason] != nil else {
            throw ValidationError("Unknown reason \(self.reason): " + MatchRender.reasons.keys.sorted().joined(separator: ", "))
        }
    }

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(
                Matches.reportUser,
                .with {
                    $0.targetUserId = self.user
                    $0.reason = MatchRender.reasons[self.reason]!
                    $0.details = self.details
                    $0.alsoBlock = self.block
                    $0.idempotencyKey = UUID().uuidString
                })
            Console.out("Report \(response.reportId) filed" + (response.blocked ? "; member blocked." : "."))
        }
    }
}

/// `kindred admin reports list|show|resolve`: report moderation (admins).
struct ReportsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reports", abstract: "Report moderation.",
        subcommands: [ListReportsCommand.self, ShowReportCommand.self, ResolveReportCommand.self])
}

/// `kindred admin reports show ID`: the report's evidence (GetReportEvidence).
struct ShowReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show a report with its evidence: the messages and the reported profile.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The report id.") var report: String

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let evidence = try await invocation.gateway.authenticated(
                AdminMethods.getReportEvidence, .with { $0.reportId = self.report })
            Console.out(MatchRender.evidence(evidence).joined(separator: "\n"))
        }
    }
}

struct ListReportsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List reports, open ones oldest first.")
    @OptionGroup var global: GlobalOptions
    @Flag(help: "Resolved ones too.") var all = false

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(
                AdminMethods.listReports, .with { $0.status = self.all ? .unspecified : .open })
            for report in response.reports {
                Console.out(
                    "\(report.reportId)  \(MatchRender.reasonName(report.reason))  reported \(report.reportedUserId)  "
                        + "by \(report.reporterUserId)  \(Render.time(report.createdUnixMs))"
                        + (report.status == .resolved ? "  resolved" : "  open"))
            }
            if response.reports.isEmpty { Console.out("No reports.") }
        }
    }
}

struct ResolveReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resolve", abstract: "Record a decision on a report.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The report id.") var report: String
    @Option(help: "no-action, warning-sent, content-removed or account-deactivated.") var resolution: String
    @Option(help: "Note for other moderators.") var note = ""
    @Option(name: .customLong("remove-photo"), help: "With content-removed: a photo of the reported member to delete (repeatable, up to 9).")
    var removePhotos: [String] = []

    static let resolutions: [String: Kindred.Api.V1.ReportResolution] = [
        "no-action": .noAction, "warning-sent": .warningSent, "content-removed": .contentRemoved,
        "account-deactivated": .accountDeactivated,
    ]

    func validate() throws {
        guard Self.resolutions[self.resolution] != nil else {
            throw ValidationError("Unknown resolution: no-action, warning-sent, content-removed or account-deactivated")
        }
        guard self.removePhotos.isEmpty || self.resolution == "content-removed" else {
            throw ValidationError("--remove-photo goes with --resolution content-removed")
        }
        guard self.removePhotos.count <= 9 else { throw ValidationError("At most 9 --remove-photo") }
    }

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            _ = try await invocation.gateway.authenticated(
                AdminMethods.resolveReport,
                .with {
                    $0.reportId = self.report
                    $0.resolution = Self.resolutions[self.resolution]!
                    $0.note = self.note
                    $0.removePhotoIds = self.removePhotos
                })
            Console.out("Report \(self.report) resolved: \(self.resolution).")
        }
    }
}

enum MatchRender {
    static let reasons: [String: Kindred.Common.V1.ReportReason] = [
        "spam": .spam, "inappropriate-content": .inappropriateContent, "harassment": .harassment,
        "fake-profile": .fakeProfile, "underage": .underage, "scam": .scam, "offline-behaviour": .offlineBehaviour,
        "other": .other,
    ]

    static func reasonName(_ reason: Kindred.Common.V1.ReportReason) -> String {
        self.reasons.first { $0.value == reason }?.key ?? "unspecified"
    }

    /// A report's evidence as lines: the report, the messages (oldest first as the report lists them), the
    /// reported member's profile and photo ids.
    static func evidence(_ evidence: Kindred.Api.V1.GetReportEvidenceResponse) -> [String] {
        var lines: [String] = []
        if let report = evidence.report {
            lines.append("Report \(report.reportId): \(self.reasonName(report.reason)), \(report.status == .resolved ? "resolved" : "open")")
            lines.append("  reported \(report.reportedUserId) by \(report.reporterUserId) at \(Render.time(report.createdUnixMs))")
            if !report.details.isEmpty { lines.append("  details: \(report.details)") }
        }
        lines.append(evidence.messages.isEmpty ? "No messages." : "Messages:")
        for message in evidence.messages {
            lines.append("  \(Render.time(message.sentUnixMs))  \(message.senderUserId): \(message.body)")
        }
        if let profile = evidence.reportedProfile {
            lines.append("Reported profile: \(profile.fields?.displayName ?? "") (\(profile.userId))")
            for photo in profile.photos { lines.append("  photo \(photo.photoId)") }
        } else {
            lines.append("Reported profile: unavailable.")
        }
        return lines
    }

    static func swipe(_ response: Kindred.Api.V1.SwipeResponse) -> String {
        let what =
            switch response.outcome {
            case .matched: "It's a match! (\(response.match?.matchId ?? ""))"
            case .connected: "Connected (\(response.match?.matchId ?? ""))."
            default: "Recorded."
            }
        return what + (response.replayed ? " (already swiped)" : "") + " \(response.remainingLikes) likes left today."
    }

    static func matches(_ matches: [Kindred.Api.V1.MatchSummary]) -> [String] {
        guard !matches.isEmpty else { return ["No matches yet."] }
        return matches.map { match in
            let direction =
                switch match.direction {
                case .outgoing: "following"
                case .incoming: "follower"
                default: "mutual"
                }
            return "\(match.profile?.userId ?? "?")  \(match.profile?.displayName ?? "")  \(direction)  "
                + "\(Render.time(match.createdUnixMs))"
        }
    }
}
