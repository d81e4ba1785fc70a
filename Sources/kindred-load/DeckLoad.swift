import ArgumentParser
import Foundation
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging
import Synchronization

/// `kindred-load deck`: GetDeck driven directly at discovery (Tests/Benchmarks/discovery-grpc.sh runs it).
///
/// The caller is the gateway, as in production: a service token (signed with auth's signing key of the cluster
/// under test: a benchmark tool, never a production path) and `viewer_user_id`, a different viewer per call drawn
/// at random from `--viewers` (a single viewer would keep one deck's data in cache). Optionally rebuilds the index
/// first (RebuildIndex with an admin token: the same rebuild the server runs at start), and writes the files an
/// h2load run needs (`--h2load-dir`: one viewer's request body, the service token and the address of the shard that
/// serves that viewer). The report gives decks per second, latency percentiles, error codes, and the CPU of
/// discovery and of this driver during the measured window (`--pids-file`).
///
/// Discovery as geographic shards (`--discovery` lists every shard in shard order): each call goes through a
/// `DiscoveryShardRouter`, as the gateway's do: to the shard last known to own the viewer (shard 0 at first), which
/// redirects (`WRONG_SHARD`) to the owner, who is remembered. Before the warm-up every viewer is called once, so
/// the measured window runs with every owner known (as a gateway that has seen its members); both passes report
/// the decks each shard answered and the calls redirected, and the CPU per deck adds every shard's.
struct DeckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deck", abstract: "First deck pages from discovery, many viewers (benchmark driver).")

    @Option(help: "The discovery service, host:port; as shards, every shard's host:port in shard order, comma-separated.")
    var discovery = "127.0.0.1:50053"
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
        let addresses = self.discovery.split(separator: ",").map(String.init)
        let clients = try addresses.map { try loadClient($0, connections: self.connections, logger: logger) }
        let shards = clients.count > 1 ? DiscoveryShardRouter(clients: clients) : nil
        let run = DeckRun(
            client: clients[0], shards: shards, tally: DeckShardTally(shards: clients.count), token: service,
            viewers: viewers, pageSize: Int32(self.pageSize))

        if self.rebuild {
            let admin = try signer.sign(
                AccessTokenClaims(
                    subject: try UUIDv7.generate(), issuedAt: now, lifetimeSeconds: 3600, tokenID: try UUIDv7.generate(),
                    sessionID: try UUIDv7.generate(), communityID: "dating", roles: ["user", "admin"]))
            // Every shard builds its own index from its own projection, one after the other.
            for (shard, client) in clients.enumerated() {
                let started = ContinuousClock.now
                let response = try await client.unary(
                    Kindred.Discovery.V1.DiscoveryService.Method.rebuildIndex, Kindred.Discovery.V1.RebuildIndexRequest(),
                    metadata: ["authorization": .string("Bearer " + admin)], options: CallOptions(timeout: .seconds(1800)))
                let which = clients.count > 1 ? " on shard \(shard)" : ""
                print(
                    "RebuildIndex\(which): "
                        + String(
                            format: "%d members indexed in %.1f s", response.indexedCandidates,
                            (ContinuousClock.now - started).seconds))
            }
        }
        if let folder = self.h2loadDir {
            // h2load calls one shard: the one that serves the first viewer (learnt by a call, as the router learns).
            var owner = 0
            if let shards {
                _ = try await run.deck(for: viewers[0])
                owner = shards.shard(of: viewers[0])
            }
            try "\(addresses[owner]) \(owner)\n".write(toFile: folder + "/deck.address", atomically: true, encoding: .utf8)
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
            for client in clients { await client.close() }
            return
        }
        print(
            "viewers \(viewers.count), concurrency \(self.concurrency), connections \(self.connections)"
                + (clients.count > 1 ? " to each of \(clients.count) shards" : ""))
        if shards != nil {
            let learning = await run.learnShards(concurrency: self.concurrency)
            print(
                String(
                    format: "every viewer once (learning their shards): %d decks in %.1f s, errors %d", learning.succeeded,
                    learning.seconds, learning.outcomes.values.reduce(0, +) - learning.succeeded))
            print("  " + DeckShardTally.line(run.tally.take()))
        }
        _ = await run.drive(concurrency: self.concurrency, for: .seconds(3))  // warm-up
        _ = run.tally.take()
        let before = ProcessCPU.sample(pidsFile: self.pidsFile)
        let report = await run.drive(concurrency: self.concurrency, for: .milliseconds(Int64(self.seconds * 1000)))
        let after = ProcessCPU.sample(pidsFile: self.pidsFile)
        let byShard = run.tally.take()
        for client in clients { await client.close() }
        DeckRun.print(report)
        if shards != nil { print(DeckShardTally.line(byShard)) }
        ProcessCPU.printUsage(before: before, after: after, seconds: report.seconds)
        Self.printCPUPerDeck(before: before, after: after, decks: report.succeeded, byShard: shards != nil ? byShard.answered : nil)
    }

    /// Discovery's CPU per deck (every shard's together), this driver's, and with shards each shard's CPU per deck
    /// it answered.
    static func printCPUPerDeck(before: ProcessCPU.Sample, after: ProcessCPU.Sample, decks: Int, byShard: [Int]?) {
        func used(_ name: String) -> Double? { after[name].map { $0 - (before[name] ?? $0) } }
        let names = ["discovery"] + (1..<max(1, byShard?.count ?? 1)).map { "discovery_\($0)" }
        let discovery = names.compactMap(used)
        guard !discovery.isEmpty, decks > 0 else { return }
        func micros(_ seconds: Double, _ count: Int) -> String { String(format: "%.0f µs", seconds / Double(count) * 1e6) }
        print(
            "CPU per deck: discovery \(micros(discovery.reduce(0, +), decks))\(byShard != nil ? " (every shard's)" : ""), "
                + "this driver \(micros(used("kindred-load") ?? 0, decks))")
        guard let byShard else { return }
        let perShard = zip(names, byShard).map { name, answered in
            answered > 0 ? "\(name) \(micros(used(name) ?? 0, answered))" : "\(name) -"
        }
        print("CPU per deck a shard answered: " + perShard.joined(separator: ", "))
    }
}

/// Runs first deck pages with a fixed number in flight, each for a random viewer, and records latencies.
struct DeckRun {
    let client: GRPCClient
    /// Discovery as shards (nil: one discovery, `client`).
    let shards: DiscoveryShardRouter?
    let tally: DeckShardTally
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
        await driveLoad(concurrency: concurrency, for: duration) {
            try await self.deck(for: self.viewers.randomElement()!)
        }
    }

    /// Every viewer's first page once, in a random order, so the router knows every viewer's shard.
    func learnShards(concurrency: Int) async -> LoadTally {
        let order = self.viewers.shuffled()
        let cursor = ViewerCursor()
        return await driveLoad(concurrency: concurrency, for: .seconds(3600)) {
            let next = cursor.next()
            guard next < order.count else { return nil }
            return try await self.deck(for: order[next])
        }
    }

    /// One first page for `viewer`, through the router with shards (tallied by the shard that answered); the
    /// number of candidates.
    func deck(for viewer: String) async throws -> Int {
        var request = Kindred.Discovery.V1.GetDeckRequest()
        request.viewerUserId = viewer
        request.pageSize = self.pageSize
        let metadata: Metadata = ["authorization": .string("Bearer " + self.token)]
        guard let shards = self.shards else {
            return try await self.client.unary(
                Kindred.Discovery.V1.DiscoveryService.Method.getDeck, request, metadata: metadata
            ).candidates.count
        }
        let asked = shards.shard(of: viewer)
        let response = try await shards.unary(
            Kindred.Discovery.V1.DiscoveryService.Method.getDeck, request, viewer: viewer, metadata: metadata)
        let answered = shards.shard(of: viewer)
        self.tally.record(shard: answered, redirected: answered != asked)
        return response.candidates.count
    }
}

/// The next position in a list shared by concurrent callers.
private final class ViewerCursor: Sendable {
    private let position = Atomic<Int>(0)

    func next() -> Int { self.position.wrappingAdd(1, ordering: .relaxed).oldValue }
}
