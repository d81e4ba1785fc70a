import Foundation
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging
import Synchronization

/// Feeds match's projections as profile would: the community (mutual mode, a like limit the run cannot reach)
/// and every member (eligible), by DeliverEvents with a profile service token.
struct Setup {
    let match: (String, Int)
    let signer: AccessTokenSigner
    let logger: Logger

    func feed(community: String, members: [String]) async throws {
        let client = GRPCClient(configuration: GRPCClientConfiguration(host: self.match.0, port: self.match.1), logger: self.logger)
        defer { Task { await client.close() } }
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
            _ = try await client.unary(
                Kindred.Match.V1.MatchService.Method.deliverEvents, request,
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
            return nil
        }
    }
}

/// Runs swipes with a fixed number in flight and records each one's latency and status.
struct LoadRun {
    let client: GRPCClient
    let tokens: [String]
    let plan: SwipePlan

    struct Report {
        var seconds: Double
        var latencies: [Duration]
        var outcomes: [String: Int]
        var matched: Int

        func print() {
            let sorted = self.latencies.sorted()
            func percentile(_ p: Double) -> String {
                guard !sorted.isEmpty else { return "-" }
                let value = sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
                return String(format: "%.2f ms", Double(value.components.attoseconds) / 1e15 + Double(value.components.seconds) * 1000)
            }
            let ok = self.outcomes["OK", default: 0]
            Swift.print(String(format: "acknowledged swipes: %d in %.1f s = %.0f/s", ok, self.seconds, Double(ok) / self.seconds))
            Swift.print("matches made: \(self.matched)")
            Swift.print("latency p50 \(percentile(0.5))  p90 \(percentile(0.9))  p99 \(percentile(0.99))  max \(percentile(1))")
            Swift.print("outcomes: \(self.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        }
    }

    func drive(concurrency: Int, for duration: Duration) async -> Report {
        let start = ContinuousClock.now
        let end = start + duration
        let results = await withTaskGroup(of: ([Duration], [String: Int], Int).self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var latencies: [Duration] = []
                    var outcomes: [String: Int] = [:]
                    var matched = 0
                    while ContinuousClock.now < end, let choice = self.plan.next() {
                        var request = Kindred.Api.V1.SwipeRequest()
                        request.targetUserId = self.plan.members[choice.target]
                        request.action = choice.like ? .like : .pass
                        request.surface = "deck"
                        let sent = ContinuousClock.now
                        do {
                            let response = try await self.client.unary(
                                Kindred.Api.V1.DeckService.Method.swipe, request,
                                metadata: ["authorization": .string("Bearer " + self.tokens[choice.swiper])])
                            latencies.append(ContinuousClock.now - sent)
                            outcomes["OK", default: 0] += 1
                            if response.outcome == .matched { matched += 1 }
                        } catch let error as RPCError {
                            outcomes["\(error.code)", default: 0] += 1
                        } catch {
                            outcomes["\(type(of: error))", default: 0] += 1
                        }
                    }
                    return (latencies, outcomes, matched)
                }
            }
            var all: ([Duration], [String: Int], Int) = ([], [:], 0)
            for await (latencies, outcomes, matched) in group {
                all.0 += latencies
                all.1.merge(outcomes, uniquingKeysWith: +)
                all.2 += matched
            }
            return all
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Report(seconds: seconds, latencies: results.0, outcomes: results.1, matched: results.2)
    }
}
