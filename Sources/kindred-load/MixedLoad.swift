import ArgumentParser
import Foundation
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging
import Synchronization

/// `kindred-load mixed`: the whole system under one realistic mix, through the gateway's public API
/// (Tests/Benchmarks/mixed-load.sh runs it).
///
/// Setup, all through the gateway: a community of its own (mutual likes, no photos needed; created with an admin
/// token), `--users` members with real profiles and locations in one city (so profile's events feed discovery,
/// match and chat as in production), `--pairs` matched pairs (their threads carry the chat traffic) and a Subscribe
/// stream for each member of the first `--subscribers` pairs. Then `--concurrency` workers each pick the next call
/// by the weights of `--mix`: a deck page (discovery, then profile's cards), a swipe (match; some likes given back,
/// so matches happen and open threads), a chat message in a matched pair (delivered live to the subscribers), a
/// profile read. The report gives sustained requests per second, p50/p99 per call type, errors, and the CPU each
/// cluster process used during the measured window (from /proc, with `--pids-file`).
struct MixedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mixed", abstract: "Deck fetches, swipes, chat with live subscribers and profile reads.")

    @Option(help: "The gateway, host:port.") var gateway = "127.0.0.1:50050"
    @Option(help: "Auth's signing key (PEM), to sign the members' and the admin's tokens.") var keyFile: String
    @Option(help: "Members.") var users = 1000
    @Option(help: "Matched pairs made in setup (their threads carry the messages).") var pairs = 200
    @Option(help: "Pairs whose two members keep a Subscribe stream open.") var subscribers = 100
    @Option(help: "Calls in flight at once.") var concurrency = 64
    @Option(help: "HTTP/2 connections to the gateway.") var connections = 4
    @Option(help: "Seconds of load after a 3 s warm-up.") var seconds = 20.0
    @Option(help: "Weights: deck=..,swipe=..,message=..,profile=..") var mix = "deck=25,swipe=35,message=20,profile=20"
    @Option(help: "The cluster's pids file (run-cluster.sh): CPU per process during the run.") var pidsFile: String?
    @Option(help: "A file for one timestamped line per failed call or broken stream, and progress every 10 s (soak).")
    var eventsFile: String?

    func run() async throws {
        var logger = Logger(label: "kindred.load")
        logger.logLevel = .error
        let weights = try MixWeights(parsing: self.mix)
        guard self.users >= 2 * self.pairs + 10, self.subscribers <= self.pairs else {
            throw ValidationError("need users >= 2 * pairs + 10 and subscribers <= pairs")
        }
        let signer = try clusterSigner(keyFile: self.keyFile)
        let gateway = try hostAndPort(self.gateway)
        let client = try loadClient(self.gateway, connections: self.connections, logger: logger)
        // Streams on connections of their own: the gateway allows a bounded number of streams per connection.
        let streamClients = (0..<max(1, self.subscribers / 40 + 1)).map { _ in
            var configuration = GRPCClientConfiguration(host: gateway.0, port: gateway.1)
            configuration.connectionCount = 1
            configuration.defaultTimeout = .seconds(600)
            return GRPCClient(configuration: configuration, logger: logger)
        }

        let community = "mixed-" + String(UUID().uuidString.prefix(8)).lowercased()
        let setup = MixedSetup(client: client, signer: signer, community: community)
        let started = ContinuousClock.now
        try await setup.createCommunity()
        let members = try (0..<self.users).map { _ in try UUIDv7.generate() }
        let memberTokens = try MemberTokens(members: members, signer: signer, community: community)
        let tokens = memberTokens.all
        try await setup.createProfiles(members: members, tokens: tokens)
        try await setup.waitForDeck(token: tokens[members.count - 1])
        let threads = try await setup.match(pairs: self.pairs, members: members, tokens: tokens)
        let events = try LoadEventLog(path: self.eventsFile)
        print(
            String(
                format: "setup: %d members with profiles, %d matched pairs with open threads, %.1f s", members.count,
                threads.count, (ContinuousClock.now - started).seconds))

        let received = Counter()
        let streams = (0..<(2 * self.subscribers)).map { member in
            let client = streamClients[member % streamClients.count]
            return Task {
                while !Task.isCancelled {  // reopened (with a fresh token) if it ends
                    do {
                        try await client.serverStreaming(
                            Kindred.Api.V1.ChatService.Method.subscribe, Kindred.Api.V1.SubscribeRequest(),
                            metadata: ["authorization": .string("Bearer " + memberTokens[member])],
                            options: CallOptions(timeout: .seconds(600))
                        ) { stream in
                            for try await response in stream {
                                if case .message? = response.event { received.value.add(1, ordering: .relaxed) }
                            }
                        }
                    } catch let error as RPCError where error.code != .deadlineExceeded && !Task.isCancelled {
                        events.streamEnded("\(error.code) (\(error.message.prefix(60)))")
                        try? await Task.sleep(for: .milliseconds(200))  // not a busy loop while the gateway is down
                    } catch {
                        try? await Task.sleep(for: .milliseconds(200))
                    }
                }
            }
        }
        try await Task.sleep(for: .seconds(1))

        // Swipers are the members outside the pairs (a pair's members already swiped on each other).
        let swipers = Array(members[(2 * self.pairs)...])
        let plan = SwipePlan(members: swipers, likeShare: 0.5, likeBackShare: 0.2)
        let run = MixedRun(
            client: client, members: members, tokens: memberTokens, swiperOffset: 2 * self.pairs,
            threads: threads, plan: plan, weights: weights, events: events)
        let progress = Task {
            while !Task.isCancelled && events.enabled {
                try await Task.sleep(for: .seconds(10))
                events.progress()
            }
        }
        print(
            "mixed load: concurrency \(self.concurrency), connections \(self.connections), "
                + "\(2 * self.subscribers) live subscribers, mix \(self.mix)")
        events.started()
        _ = await run.drive(concurrency: self.concurrency, for: .seconds(3))  // warm-up
        let before = ProcessCPU.sample(pidsFile: self.pidsFile)
        let receivedBefore = received.value.load(ordering: .relaxed)
        let report = await run.drive(concurrency: self.concurrency, for: .milliseconds(Int64(self.seconds * 1000)))
        let after = ProcessCPU.sample(pidsFile: self.pidsFile)
        report.print()
        print("messages received on live streams during the run: \(received.value.load(ordering: .relaxed) - receivedBefore)")
        ProcessCPU.printUsage(before: before, after: after, seconds: report.seconds)
        progress.cancel()
        for stream in streams { stream.cancel() }
        await client.close()
        for streamClient in streamClients { await streamClient.close() }
    }
}

/// Messages seen on the live streams.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

/// The call mix: relative weights per call type.
struct MixWeights {
    static let kinds = ["deck", "swipe", "message", "profile"]
    var weights: [String: Int]

    init(parsing text: String) throws {
        var weights: [String: Int] = [:]
        for part in text.split(separator: ",") {
            let pair = part.split(separator: "=")
            guard pair.count == 2, Self.kinds.contains(String(pair[0])), let weight = Int(pair[1]), weight >= 0 else {
                throw ValidationError("--mix: kind=weight,... with kinds \(Self.kinds.joined(separator: ", "))")
            }
            weights[String(pair[0])] = weight
        }
        guard weights.values.reduce(0, +) > 0 else { throw ValidationError("--mix: all weights are zero") }
        self.weights = weights
    }

    /// A kind by weight; with `excluded`, one of the others (unless only `excluded` has weight).
    func pick(without excluded: String? = nil) -> String {
        let weight = { (kind: String) in kind == excluded ? 0 : self.weights[kind, default: 0] }
        let total = Self.kinds.map(weight).reduce(0, +)
        guard total > 0 else { return excluded ?? Self.kinds[0] }
        var roll = Int.random(in: 0..<total)
        for kind in Self.kinds {
            let share = weight(kind)
            if roll < share { return kind }
            roll -= share
        }
        return Self.kinds[0]
    }
}

/// Setup through the gateway, as apps and an admin would.
struct MixedSetup {
    let client: GRPCClient
    let signer: AccessTokenSigner
    let community: String

    func token(for subject: String, roles: [String] = ["user"]) throws -> String {
        try self.signer.sign(
            AccessTokenClaims(
                subject: subject, issuedAt: Int64(Date().timeIntervalSince1970), lifetimeSeconds: 900,
                tokenID: try UUIDv7.generate(), sessionID: try UUIDv7.generate(), communityID: self.community,
                roles: roles))
    }

    private func bearer(_ token: String) -> Metadata { ["authorization": .string("Bearer " + token)] }

    /// Mutual likes, limits a benchmark cannot reach, no photos needed (min_photos 0 needs an update: creation
    /// takes 0 as "the default").
    func createCommunity() async throws {
        let admin = self.bearer(try self.token(for: try UUIDv7.generate(), roles: ["user", "admin"]))
        var create = Kindred.Api.V1.CreateCommunityRequest()
        create.communityId = self.community
        create.displayName = "Mixed load"
        create.settings = .with {
            $0.mode = .mutual
            $0.dailyLikeLimit = 10_000
            $0.hourlyMessageLimit = 10_000
            $0.defaultRadiusKm = 50
        }
        _ = try await self.client.unary(Kindred.Api.V1.AdminService.Method.createCommunity, create, metadata: admin)
        var update = Kindred.Api.V1.UpdateCommunityRequest()
        update.communityId = self.community
        update.settings = .with { $0.minPhotos = 0 }
        update.updatePaths = ["settings.min_photos"]
        _ = try await self.client.unary(Kindred.Api.V1.AdminService.Method.updateCommunity, update, metadata: admin)
    }

    /// A profile and a location (within ~16 km of one city centre: every pair within each other's 50 km at their
    /// published positions, so every swipe is on someone the swiper's deck could show) for every member, 32 at a time.
    func createProfiles(members: [String], tokens: [String]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in members.indices {
                if index >= 32 { try await group.next() }
                group.addTask {
                    var create = Kindred.Api.V1.CreateProfileRequest()
                    create.fields = .with {
                        $0.displayName = "Member \(index)"
                        $0.birthDate = .with {
                            $0.year = Int32(1970 + index % 30)
                            $0.month = 1 + Int32(index % 12)
                            $0.day = 1 + Int32(index % 28)
                        }
                        $0.bio = "Load test member"
                    }
                    create.idempotencyKey = try UUIDv7.generate()
                    try await self.retrying(.unavailable) {
                        _ = try await self.client.unary(
                            Kindred.Api.V1.ProfileService.Method.createProfile, create,
                            metadata: self.bearer(tokens[index]))
                    }
                    var location = Kindred.Api.V1.UpdateLocationRequest()
                    location.location = .with {
                        $0.latitudeDeg = 52.52 + Double.random(in: -0.14...0.14)
                        $0.longitudeDeg = 13.40 + Double.random(in: -0.2...0.2)
                    }
                    try await self.retrying(.unavailable) {
                        _ = try await self.client.unary(
                            Kindred.Api.V1.ProfileService.Method.updateLocation, location,
                            metadata: self.bearer(tokens[index]))
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Waits until discovery indexed the last member created (profile's events arrive in order per user, and
    /// every member's are written before the last one's).
    func waitForDeck(token: String) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            var request = Kindred.Api.V1.GetDeckRequest()
            request.pageSize = 10
            if let deck = try? await self.client.unary(
                Kindred.Api.V1.DeckService.Method.getDeck, request, metadata: self.bearer(token)), !deck.cards.isEmpty
            {
                return
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw ValidationError("discovery did not index the members within 120 s")
    }

    /// Members (2i, 2i+1) like each other; returns each pair's thread once chat has opened it.
    func match(pairs: Int, members: [String], tokens: [String]) async throws -> [MixedRun.Thread] {
        try await withThrowingTaskGroup(of: MixedRun.Thread.self) { group in
            var threads: [MixedRun.Thread] = []
            for pair in 0..<pairs {
                if pair >= 16, let thread = try await group.next() { threads.append(thread) }
                group.addTask {
                    let (first, second) = (2 * pair, 2 * pair + 1)
                    _ = try await self.swipe(tokens[first], on: members[second])
                    let matched = try await self.swipe(tokens[second], on: members[first])
                    guard matched.outcome == .matched, let match = matched.match else {
                        throw ValidationError("pair \(pair) did not match: \(matched.outcome)")
                    }
                    // The thread opens when match's event reaches chat: the first message waits for it.
                    var message = Kindred.Api.V1.SendMessageRequest()
                    message.threadId = match.matchId
                    message.clientMessageId = try UUIDv7.generate()
                    message.body = "hello"
                    try await self.retrying(.notFound) {
                        _ = try await self.client.unary(
                            Kindred.Api.V1.ChatService.Method.sendMessage, message,
                            metadata: self.bearer(tokens[first]))
                    }
                    return MixedRun.Thread(id: match.matchId, members: (first, second))
                }
            }
            for try await thread in group { threads.append(thread) }
            return threads.sorted { $0.members.0 < $1.members.0 }
        }
    }

    /// A like; match learns members from profile's events, so NOT_FOUND is retried for a while.
    private func swipe(_ token: String, on target: String) async throws -> Kindred.Api.V1.SwipeResponse {
        var request = Kindred.Api.V1.SwipeRequest()
        request.targetUserId = target
        request.action = .like
        request.surface = "deck"
        var response = Kindred.Api.V1.SwipeResponse()
        try await self.retrying(.notFound) {
            response = try await self.client.unary(
                Kindred.Api.V1.DeckService.Method.swipe, request, metadata: self.bearer(token))
        }
        return response
    }

    /// `body` again while it fails with `code` (or UNAVAILABLE: setup is not measured, and a soak's faults may
    /// begin while it runs), for at most a minute.
    private func retrying(_ code: StatusCode, _ body: () async throws -> Void) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try await body()
            } catch let error as RPCError
                where (error.code == code || error.code == .unavailable) && ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}

/// The measured load: each worker picks its next call by the mix and records its latency and status by type.
struct MixedRun {
    struct Thread: Sendable {
        var id: String
        var members: (Int, Int)
    }

    struct Report {
        var seconds: Double
        var latencies: [String: [Duration]]
        var outcomes: [String: [String: Int]]
        var matched: Int

        func print() {
            let ok = self.latencies.values.map(\.count).reduce(0, +)
            Swift.print(
                String(
                    format: "all calls: %d acknowledged in %.1f s = %.0f requests/s; matches made: %d", ok,
                    self.seconds, Double(ok) / self.seconds, self.matched))
            for kind in MixWeights.kinds where self.outcomes[kind] != nil {
                let sorted = self.latencies[kind, default: []].sorted()
                func percentile(_ p: Double) -> String { percentileText(sorted, p, decimals: 1) }
                let errors = self.outcomes[kind, default: [:]].filter { $0.key != "OK" }
                Swift.print(
                    String(
                        format: "  %@ %6d ok = %6.0f/s  p50 %@  p99 %@  max %@",
                        kind.padding(toLength: 8, withPad: " ", startingAt: 0) as NSString, sorted.count,
                        Double(sorted.count) / self.seconds, percentile(0.5) as NSString,
                        percentile(0.99) as NSString, percentile(1) as NSString)
                        + (errors.isEmpty
                            ? "" : "  errors: " + errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                                .joined(separator: ", ")))
            }
        }
    }

    let client: GRPCClient
    let members: [String]
    let tokens: MemberTokens
    /// The swipers are the members from this index on (the plan's member i is member swiperOffset + i).
    let swiperOffset: Int
    let threads: [Thread]
    let plan: SwipePlan
    let weights: MixWeights
    let events: LoadEventLog

    private func bearer(_ token: String) -> Metadata { ["authorization": .string("Bearer " + token)] }

    /// The next call's kind by the mix, and for a swipe its choice from the plan. Once every swiper has swiped
    /// on every other, swipes leave the mix: the other kinds go on in their proportions.
    private func next() -> (kind: String, swipe: SwipePlan.Choice?) {
        let kind = self.weights.pick(without: self.plan.isExhausted ? "swipe" : nil)
        guard kind == "swipe" else { return (kind, nil) }
        if let choice = self.plan.next() { return (kind, choice) }
        return (self.weights.pick(without: "swipe"), nil)
    }

    /// One call of `kind` (a swipe as `swipe` chose); returns whether it made a match.
    private func call(_ kind: String, _ swipe: SwipePlan.Choice?) async throws -> Bool {
        switch kind {
        case "swipe":
            guard let choice = swipe else { throw ValidationError("the swipe plan ran out") }
            var request = Kindred.Api.V1.SwipeRequest()
            request.targetUserId = self.plan.members[choice.target]
            request.action = choice.like ? .like : .pass
            request.surface = "deck"
            let response = try await self.client.unary(
                Kindred.Api.V1.DeckService.Method.swipe, request, metadata: self.bearer(self.tokens[self.swiperOffset + choice.swiper]))
            return response.outcome == .matched
        case "message":
            let thread = self.threads.randomElement()!
            var request = Kindred.Api.V1.SendMessageRequest()
            request.threadId = thread.id
            request.clientMessageId = try UUIDv7.generate()
            request.body = "How about a walk on Sunday?"
            let sender = Bool.random() ? thread.members.0 : thread.members.1
            _ = try await self.client.unary(
                Kindred.Api.V1.ChatService.Method.sendMessage, request, metadata: self.bearer(self.tokens[sender]))
        case "profile":
            let viewer = Int.random(in: 0..<self.members.count)
            var target = Int.random(in: 0..<self.members.count)
            if target == viewer { target = (target + 1) % self.members.count }
            var request = Kindred.Api.V1.GetProfileRequest()
            request.userId = self.members[target]
            _ = try await self.client.unary(
                Kindred.Api.V1.ProfileService.Method.getProfile, request, metadata: self.bearer(self.tokens[viewer]))
        default:
            var request = Kindred.Api.V1.GetDeckRequest()
            request.pageSize = 10
            _ = try await self.client.unary(
                Kindred.Api.V1.DeckService.Method.getDeck, request,
                metadata: self.bearer(self.tokens[Int.random(in: 0..<self.members.count)]))
        }
        return false
    }

    func drive(concurrency: Int, for duration: Duration) async -> Report {
        let start = ContinuousClock.now
        let end = start + duration
        typealias Partial = (latencies: [String: [Duration]], outcomes: [String: [String: Int]], matched: Int)
        let total = await withTaskGroup(of: Partial.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var partial: Partial = ([:], [:], 0)
                    while ContinuousClock.now < end {
                        let (kind, swipe) = self.next()
                        let sent = ContinuousClock.now
                        do {
                            if try await self.call(kind, swipe) { partial.matched += 1 }
                            partial.latencies[kind, default: []].append(ContinuousClock.now - sent)
                            partial.outcomes[kind, default: [:]]["OK", default: 0] += 1
                            self.events.acknowledged.add(1, ordering: .relaxed)
                        } catch let error as RPCError {
                            // The code and the start of the message: which limit or failure it was.
                            let reason = "\(error.code) (\(error.message.prefix(60)))"
                            partial.outcomes[kind, default: [:]][reason, default: 0] += 1
                            self.events.error(kind, reason)
                        } catch {
                            partial.outcomes[kind, default: [:]]["\(type(of: error))", default: 0] += 1
                            self.events.error(kind, "\(type(of: error))")
                        }
                    }
                    return partial
                }
            }
            var total: Partial = ([:], [:], 0)
            for await partial in group {
                total.latencies.merge(partial.latencies, uniquingKeysWith: +)
                total.outcomes.merge(partial.outcomes) { $0.merging($1, uniquingKeysWith: +) }
                total.matched += partial.matched
            }
            return total
        }
        return Report(
            seconds: (ContinuousClock.now - start).seconds, latencies: total.latencies, outcomes: total.outcomes,
            matched: total.matched)
    }
}

/// CPU time per cluster process from /proc/<pid>/stat (utime + stime), the servers by the pids file and
/// PostgreSQL as its postmaster plus every backend (children of the postmaster).
enum ProcessCPU {
    typealias Sample = [String: Double]  // name -> CPU seconds

    static func sample(pidsFile: String?) -> Sample {
        guard let pidsFile, let text = try? String(contentsOfFile: pidsFile, encoding: .utf8) else { return [:] }
        var sample: Sample = [:]
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let pid = Int(parts[1]), parts[0] != "run-cluster", parts[0] != "smtp-sink" else {
                continue
            }
            var pids = [pid]
            if parts[0] == "postgres" { pids += Self.children(of: pid) }
            sample[String(parts[0])] = pids.compactMap { Self.cpuTicks(of: $0) }.reduce(0, +) / ticks
        }
        sample["kindred-load"] = (Self.cpuTicks(of: Int(getpid())) ?? 0) / ticks
        return sample
    }

    static func printUsage(before: Sample, after: Sample, seconds: Double) {
        guard !after.isEmpty else { return }
        let used = after.compactMap { name, cpu in before[name].map { (name, cpu - $0) } }.sorted { $0.1 > $1.1 }
        let total = used.map(\.1).reduce(0, +)
        Swift.print(
            String(format: "CPU during the run (%.1f s, %d cores): %.1f core-seconds in all", seconds,
                   ProcessInfo.processInfo.activeProcessorCount, total))
        for (name, cpu) in used {
            Swift.print(
                String(
                    format: "  %@ %6.1f s = %5.0f%% of one core",
                    name.padding(toLength: 12, withPad: " ", startingAt: 0) as NSString, cpu, cpu / seconds * 100))
        }
    }

    /// utime + stime in clock ticks (fields 14 and 15 of /proc/<pid>/stat, after the command in parentheses).
    private static func cpuTicks(of pid: Int) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return user + system
    }

    private static func children(of parent: Int) -> [Int] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry in
            guard let pid = Int(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int(fields[1]) == parent ? pid : nil
        }
    }
}
