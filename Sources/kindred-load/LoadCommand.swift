import ArgumentParser
import Foundation
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging

/// `kindred-load swipes`: the swipe benchmark's load driver (Tests/Benchmarks/match-swipes.sh runs it).
///
/// Many members of one community swipe through the gateway's public DeckService/Swipe for a fixed time, each
/// walking its own shuffled order of the others (nobody is swiped twice), with a mix of likes and passes and
/// a share of likes given back to someone who already liked the swiper (so matches happen). Every call is
/// timed from send to answer; the report gives acknowledged swipes per second, latency percentiles and the
/// error codes. Setup signs the members' access tokens with auth's signing key (the key file of the cluster
/// under test: a benchmark tool, never a production path) and feeds match's and discovery's member projections
/// as profile would (DeliverEvents with a profile service token).
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swipes", abstract: "Swipe load through the gateway (benchmark driver).")

    @Option(help: "The gateway, host:port.") var gateway = "127.0.0.1:50050"
    @Option(help: "The match service (setup only), host:port.") var match = "127.0.0.1:50054"
    @Option(help: "The discovery service (setup only), host:port.") var discovery = "127.0.0.1:50053"
    @Option(help: "Auth's signing key (PEM), to sign the members' tokens.") var keyFile: String
    @Option(help: "Members.") var users = 4000
    @Option(help: "Calls in flight at once.") var concurrency = 256
    @Option(help: "HTTP/2 connections to the gateway.") var connections = 4
    @Option(help: "Seconds of load after a 3 s warm-up.") var seconds = 20.0
    @Option(help: "Share of swipes that are likes.") var likeShare = 0.5
    @Option(help: "Share of likes given back to someone who liked the swiper.") var likeBackShare = 0.2

    func run() async throws {
        var logger = Logger(label: "kindred.load")
        logger.logLevel = .error
        let signer = try clusterSigner(keyFile: self.keyFile)
        let community = "bench-" + String(UUID().uuidString.prefix(8)).lowercased()
        let members = try (0..<self.users).map { _ in try UUIDv7.generate() }
        try await Setup(
            match: try hostAndPort(self.match), discovery: try hostAndPort(self.discovery), signer: signer,
            logger: logger)
            .feed(community: community, members: members)
        let now = Int64(Date().timeIntervalSince1970)
        let tokens = try members.map { id in
            try signer.sign(
                AccessTokenClaims(
                    subject: id, issuedAt: now, lifetimeSeconds: 900, tokenID: try UUIDv7.generate(),
                    sessionID: try UUIDv7.generate(), communityID: community, roles: ["user"]))
        }
        let client = try loadClient(self.gateway, connections: self.connections, logger: logger)
        let plan = SwipePlan(members: members, likeShare: self.likeShare, likeBackShare: self.likeBackShare)
        let run = LoadRun(client: client, tokens: tokens, plan: plan)
        print("members \(members.count), concurrency \(self.concurrency), connections \(self.connections)")
        _ = await run.drive(concurrency: self.concurrency, for: .seconds(3))  // warm-up
        let report = await run.drive(concurrency: self.concurrency, for: .milliseconds(Int64(self.seconds * 1000)))
        await client.close()
        LoadRun.print(report)
    }
}
