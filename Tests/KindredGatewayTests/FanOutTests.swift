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
        let (answer, missing) = try await FanOut<Answer>(partTimeout: .seconds(2))
            .gather(.init(), [Self.part("a", essential: true), Self.part("b"), Self.part("c")])
        #expect(Set(answer.values) == ["a", "b", "c"])
        #expect(missing.isEmpty)
    }

    @Test("a slow or failing non-essential part is left out and named; the answer does not wait for it")
    func partial() async throws {
        let started = ContinuousClock.now
        let (answer, missing) = try await FanOut<Answer>(partTimeout: .milliseconds(200)).gather(
            .init(),
            [
                Self.part("a", essential: true), Self.part("slow", after: .seconds(300)), Self.part("broken", fails: true),
                Part(name: "absent", essential: false, fetch: nil),
            ]
        )
        #expect(answer.values == ["a"])
        #expect(missing == ["slow", "broken", "absent"])
        // Far less than the slow part's 300 s (a generous bound: parallel tests can starve the 2-core pool).
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test("an essential failure fails the whole call with its error")
    func essentialFailure() async throws {
        await #expect(throws: RPCError.self) {
            _ = try await FanOut<Answer>(partTimeout: .seconds(1))
                .gather(.init(), [Self.part("a", essential: true, fails: true), Self.part("b")])
        }
    }
}
