import Foundation
import KindredGRPC
import NIOCore
import Testing

@testable import KindredGateway

@Suite("Fan-out")
struct FanOutTests {
    struct Answer: Sendable { var values: [String] = [] }
    typealias Part = FanOut<Answer>.Part

    static func part(_ name: String, essential: Bool = false, after delay: Duration = .zero, fails: Bool = false) -> Part {
        Part(name: name, essential: essential) {
            try await Task.sleep(for: delay)
            if fails { throw RPCError(.internalError, "\(name) failed") }
            return { $0.values.append(name) }
        }
    }

    @Test("complete answer when every part arrives")
    func complete() async throws {
        // The parts answer at once; the limit only has to be longer than a busy machine can take to run them.
        let (answer, missing) = try await FanOut<Answer>(partTimeout: .seconds(120))
            .gather(.init(), [Self.part("a", essential: true), Self.part("b"), Self.part("c")])
        #expect(Set(answer.values) == ["a", "b", "c"])
        #expect(missing.isEmpty)
    }

    @Test("a slow or failing non-essential part is left out and named; the answer does not wait for it")
    func partial() async throws {
        let slowEnded = SlowPartEnd()
        let slow = Part(name: "slow", essential: false) {
            do {
                try await Task.sleep(for: .seconds(300))
            } catch {
                slowEnded.record("cancelled")
                throw error
            }
            slowEnded.record("finished")
            return { $0.values.append("slow") }
        }
        let (answer, missing) = try await FanOut<Answer>(partTimeout: .milliseconds(200)).gather(
            .init(),
            [Self.part("a", essential: true), slow, Self.part("broken", fails: true), Part(name: "absent", essential: false, fetch: nil)]
        )
        #expect(answer.values == ["a"])
        #expect(missing == ["slow", "broken", "absent"])
        // The answer did not wait for the slow part: it was cut off (cancelled), not waited out, however slowly a
        // busy machine ran the rest.
        #expect(slowEnded.how == "cancelled")
    }

    /// How the slow part ended.
    final class SlowPartEnd: @unchecked Sendable {
        private let lock = NSLock()
        private var ended: String?
        var how: String? { self.lock.withLock { self.ended } }
        func record(_ how: String) { self.lock.withLock { self.ended = how } }
    }

    @Test("an essential failure fails the whole call with its error")
    func essentialFailure() async throws {
        await #expect(throws: RPCError.self) {
            _ = try await FanOut<Answer>(partTimeout: .seconds(1))
                .gather(.init(), [Self.part("a", essential: true, fails: true), Self.part("b")])
        }
    }
}
