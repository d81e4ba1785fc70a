import Foundation
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging
import Synchronization

/// Feeds match's and discovery's projections as profile would: the community (mutual mode, a like limit the run
/// cannot reach) and every member (eligible, 30, in one Paris cell, open to everyone: each one a member the
/// others' decks could show, which match asks discovery before every swipe), by DeliverEvents with a profile
/// service token.
struct Setup {
    let match: (String, Int)
    let discovery: (String, Int)
    let signer: AccessTokenSigner
    let logger: Logger

    func feed(community: String, members: [String]) async throws {
        let clients = [self.match, self.discovery].map {
            GRPCClient(configuration: GRPCClientConfiguration(host: $0.0, port: $0.1), logger: self.logger)
        }
        defer { Task { for client in clients { await client.close() } } }
        let token = try self.signer.sign(
            AccessTokenClaims(
                subject: "service:profile", issuedAt: Int64(Date().timeIntervalSince1970), lifetimeSeconds: 900,
                tokenID: try UUIDv7.generate(), sessionID: nil, roles: ["service"]))
        func deliver(_ events: [Kindred.Common.V1.Event]) async throws {
            var request = Kindred.Common.V1.DeliverEventsRequest()
            request.events = try events.map {
                var event = $0
                event.producer = "profile"
                event.eventId = try UUIDv7.generate()
                return event
            }
            _ = try await clients[0].unary(
                Kindred.Match.V1.MatchService.Method.deliverEvents, request,
                metadata: ["authorization": .string("Bearer " + token)])
            _ = try await clients[1].unary(
                Kindred.Discovery.V1.DiscoveryService.Method.deliverEvents, request,
                metadata: ["authorization": .string("Bearer " + token)])
        }
        var communityEvent = Kindred.Common.V1.Event()
        communityEvent.communityId = community
        communityEvent.payload = .communityUpdated(
            .with {
                $0.community = .with {
                    $0.communityId = community
                    $0.version = 1
                    $0.settings = .with {
                        $0.mode = .mutual
                        $0.dailyLikeLimit = 10_000
                        $0.undoWindowSeconds = 300
                        $0.dailyUndoLimit = 3
                    }
                }
            })
        try await deliver([communityEvent])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for start in stride(from: 0, to: members.count, by: 100) {
                let chunk = members[start..<min(start + 100, members.count)]
                group.addTask {
                    try await deliver(
                        chunk.map { id in
                            var event = Kindred.Common.V1.Event()
                            event.userId = id
                            event.communityId = community
                            event.payload = .profileUpdated(
                                .with {
                                    $0.snapshot = .with {
                                        $0.userId = id
                                        $0.communityId = community
                                        $0.eligible = true
                                        $0.version = 1
                                        $0.geohashCell = "u09tvw"
                                        $0.birthDate = .with { $0.year = 1996; $0.month = 1; $0.day = 1 }
                                    }
                                })
                            return event
                        })
                }
                if start % 800 == 700 { try await group.next() }
            }
            try await group.waitForAll()
        }
    }
}

/// Who swipes on whom next: each member walks a shuffled order of the others; with `likeBackShare` a like
/// goes to someone who liked the swiper and was not swiped yet (a match).
final class SwipePlan: Sendable {
    struct Choice {
        var swiper: Int
        var target: Int
        var like: Bool
    }

    private struct State {
        var cursors: [Int]
        var offsets: [Int]
        var likedBy: [[Int]]
        var swiped: [Set<Int>]
        var nextSwiper = 0
    }

    let members: [String]
    private let likeShare: Double
    private let likeBackShare: Double
    private let state: Mutex<State>
    private let exhausted = Atomic<Bool>(false)

    /// Every member has swiped on every other: `next()` has nothing left.
    var isExhausted: Bool { self.exhausted.load(ordering: .relaxed) }

    init(members: [String], likeShare: Double, likeBackShare: Double) {
        self.members = members
        self.likeShare = likeShare
        self.likeBackShare = likeBackShare
        let count = members.count
        self.state = Mutex(
            State(
                cursors: Array(repeating: 0, count: count),
                offsets: (0..<count).map { _ in Int.random(in: 1..<max(2, count)) },
                likedBy: Array(repeating: [], count: count),
                swiped: Array(repeating: [], count: count)))
    }

    /// The next swipe of the next member in turn (round robin, so every member swipes at a human pace).
    func next() -> Choice? {
        self.state.withLock { state in
            let count = self.members.count
            for _ in 0..<count {
                let swiper = state.nextSwiper
                state.nextSwiper = (state.nextSwiper + 1) % count
                if Double.random(in: 0..<1) < self.likeBackShare,
                    let index = state.likedBy[swiper].firstIndex(where: { !state.swiped[swiper].contains($0) })
                {
                    let target = state.likedBy[swiper].remove(at: index)
                    state.swiped[swiper].insert(target)
                    return Choice(swiper: swiper, target: target, like: true)
                }
                // A stride walk through the others (a permutation when the stride is coprime; skipping repeats).
                while state.cursors[swiper] < count - 1 {
                    state.cursors[swiper] += 1
                    let target = (swiper + state.cursors[swiper] * state.offsets[swiper]) % count
                    guard target != swiper, !state.swiped[swiper].contains(target) else { continue }
                    state.swiped[swiper].insert(target)
                    let like = Double.random(in: 0..<1) < self.likeShare
                    if like { state.likedBy[target].append(swiper) }
                    return Choice(swiper: swiper, target: target, like: like)
                }
            }
            self.exhausted.store(true, ordering: .relaxed)
            return nil
        }
    }
}

/// Runs swipes with a fixed number in flight and records each one's latency and status.
struct LoadRun {
    let client: GRPCClient
    let tokens: [String]
    let plan: SwipePlan

    /// Acknowledged swipes per second, matches made (the tally's count), latencies and outcomes.
    static func print(_ tally: LoadTally) {
        Swift.print(
            String(
                format: "acknowledged swipes: %d in %.1f s = %.0f/s", tally.succeeded, tally.seconds,
                Double(tally.succeeded) / tally.seconds))
        Swift.print("matches made: \(tally.counted)")
        tally.printLatenciesAndOutcomes()
        // A swipe that makes a match waits for chat and profile to apply it; one that does not, does not wait.
        for (outcome, latencies) in tally.byOutcome.sorted(by: { $0.key < $1.key }) {
            let sorted = latencies.sorted()
            let line = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]
                .map { "\($0.0) \(percentileText(sorted, $0.1))" }.joined(separator: "  ")
            Swift.print("latency \(outcome) (\(sorted.count)): \(line)")
        }
    }

    /// Swipes from the plan (each caller the next swiper's next target) until the time is up or the plan is done;
    /// counts the matches made.
    func drive(concurrency: Int, for duration: Duration) async -> LoadTally {
        let split = OutcomeLatencies()
        var tally = await driveLoad(concurrency: concurrency, for: duration) {
            guard let choice = self.plan.next() else { return nil }
            var request = Kindred.Api.V1.SwipeRequest()
            request.targetUserId = self.plan.members[choice.target]
            request.action = choice.like ? .like : .pass
            request.surface = "deck"
            let started = ContinuousClock.now
            let response = try await self.client.unary(
                Kindred.Api.V1.DeckService.Method.swipe, request,
                metadata: ["authorization": .string("Bearer " + self.tokens[choice.swiper])])
            split.record("\(response.outcome)", ContinuousClock.now - started)
            return response.outcome == .matched ? 1 : 0
        }
        tally.byOutcome = split.latencies.withLock { $0 }
        return tally
    }
}

/// The latencies of answered swipes by outcome (RECORDED, MATCHED), from the callers of one run.
final class OutcomeLatencies: Sendable {
    let latencies = Mutex<[String: [Duration]]>([:])

    func record(_ outcome: String, _ latency: Duration) {
        self.latencies.withLock { $0[outcome, default: []].append(latency) }
    }
}
