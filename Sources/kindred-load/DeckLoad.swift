import ArgumentParser
import Foundation
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging

/// `kindred-load deck`: GetDeck driven directly at discovery (Tests/Benchmarks/discovery-grpc.sh runs it).
///
/// The caller is the gateway, as in production: a service token (signed with auth's signing key of the cluster
/// under test: a benchmark tool, never a production path) and `viewer_user_id`, a different viewer per call drawn
/// at random from `--viewers` (a single viewer would keep one deck's data in cache). Optionally rebuilds the index
/// first (RebuildIndex with an admin token: the same rebuild the server runs at start), and writes the files an
/// h2load run needs (`--h2load-dir`: one viewer's request body and the service token). The report gives decks per
/// second, latency percentiles, error codes, and the CPU of discovery and of this driver during the measured
/// window (`--pids-file`).
struct DeckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deck", abstract: "First deck pages from discovery, many viewers (benchmark driver).")

    @Option(help: "The discovery service, host:port.") var discovery = "127.0.0.1:50053"
    @Option(help: "Auth's signing key (PEM), to sign the service and admin tokens.") var keyFile: String
    @Option(help: "A file of viewer user ids, one a line (indexed members).") var viewers: String
    @Option(help: "Calls in flight at once.") var concurrency = 32
    @Option(help: "HTTP/2 connections to discovery.") var connections = 2
    @Option(help: "Seconds of load after a 3 s warm-up (0: none).") var seconds = 20.0
    @Option(help: "Candidates per page.") var pageSize = 20
    @Flag(help: "Call RebuildIndex (admin) first and report how long it took.") var rebuild = false
    @Option(help: "Write h2load's request body (first viewer) and bearer token into this folder.") var h2loadDir: String?
    @Option(help: "The cluster's pids file (run-cluster.sh): CPU per process during the run.") var pidsFile: String?

    func run() async throws {
        var logger = Logger(label: "kindred.load")
        logger.logLevel = .error
        let signer = try clusterSigner(keyFile: self.keyFile)
        let viewers = try String(contentsOfFile: self.viewers, encoding: .utf8).split(separator: "\n").map(String.init)
        guard !viewers.isEmpty else { throw ValidationError("no viewers in \(self.viewers)") }
        let now = Int64(Date().timeIntervalSince1970)
        let service = try signer.sign(
            AccessTokenClaims(
                subject: "service:gateway", issuedAt: now, lifetimeSeconds: 3600, tokenID: try UUIDv7.generate(),
                sessionID: nil, roles: ["service"]))
        let client = try loadClient(self.discovery, connections: self.connections, logger: logger)

        if self.rebuild {
            let admin = try signer.sign(
                AccessTokenClaims(
                    subject: try UUIDv7.generate(), issuedAt: now, lifetimeSeconds: 3600, tokenID: try UUIDv7.generate(),
                    sessionID: try UUIDv7.generate(), communityID: "dating", roles: ["user", "admin"]))
            let started = ContinuousClock.now
            let response = try await client.unary(
                Kindred.Discovery.V1.DiscoveryService.Method.rebuildIndex, Kindred.Discovery.V1.RebuildIndexRequest(),
                metadata: ["authorization": .string("Bearer " + admin)], options: CallOptions(timeout: .seconds(1800)))
            print(
                String(
                    format: "RebuildIndex: %d members indexed in %.1f s", response.indexedCandidates,
                    (ContinuousClock.now - started).seconds))
        }
        if let folder = self.h2loadDir {
            var request = Kindred.Discovery.V1.GetDeckRequest()
            request.viewerUserId = viewers[0]
            request.pageSize = Int32(self.pageSize)
            let message = try request.serializedBytes()
            let length = UInt32(message.count)
            let frame = [0, UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)] + message
            try Data(frame).write(to: URL(fileURLWithPath: folder).appendingPathComponent("deck.bin"))
            try service.write(toFile: folder + "/token", atomically: true, encoding: .utf8)
        }
        guard self.seconds > 0 else {
            await client.close()
            return
        }
        let run = DeckRun(client: client, token: service, viewers: viewers, pageSize: Int32(self.pageSize))
        print("viewers \(viewers.count), concurrency \(self.concurrency), connections \(self.connections)")
        _ = await run.drive(concurrency: self.concurrency, for: .seconds(3))  // warm-up
        let before = ProcessCPU.sample(pidsFile: self.pidsFile)
        let report = await run.drive(concurrency: self.concurrency, for: .milliseconds(Int64(self.seconds * 1000)))
        let after = ProcessCPU.sample(pidsFile: self.pidsFile)
        await client.close()
        DeckRun.print(report)
        ProcessCPU.printUsage(before: before, after: after, seconds: report.seconds)
        if let server = after["discovery"], let start = before["discovery"], report.succeeded > 0 {
            let driver = (after["kindred-load"] ?? 0) - (before["kindred-load"] ?? 0)
            print(
                String(
                    format: "CPU per deck: discovery %.0f µs, this driver %.0f µs", (server - start) / Double(report.succeeded) * 1e6,
                    driver / Double(report.succeeded) * 1e6))
        }
    }
}

/// Runs first deck pages with a fixed number in flight, each for a random viewer, and records latencies.
struct DeckRun {
    let client: GRPCClient
    let token: String
    let viewers: [String]
    let pageSize: Int32

    /// Decks per second, candidates a page (the tally's count), latencies and outcomes.
    static func print(_ tally: LoadTally) {
        Swift.print(
            String(
                format: "decks: %d in %.1f s = %.0f/s (%.1f candidates a page)", tally.succeeded, tally.seconds,
                Double(tally.succeeded) / tally.seconds, Double(tally.counted) / Double(max(1, tally.succeeded))))
        tally.printLatenciesAndOutcomes()
    }

    /// First pages for random viewers until the time is up; counts the candidates received.
    func drive(concurrency: Int, for duration: Duration) async -> LoadTally {
        let metadata: Metadata = ["authorization": .string("Bearer " + self.token)]
        return await driveLoad(concurrency: concurrency, for: duration) {
            var request = Kindred.Discovery.V1.GetDeckRequest()
            request.viewerUserId = self.viewers.randomElement()!
            request.pageSize = self.pageSize
            let response = try await self.client.unary(
                Kindred.Discovery.V1.DiscoveryService.Method.getDeck, request, metadata: metadata)
            return response.candidates.count
        }
    }
}
