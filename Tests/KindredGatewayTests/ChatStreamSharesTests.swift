import KindredGRPC
import Logging
import Testing

@testable import KindredGateway

/// Who gets a chat Subscribe stream on the gateway: `perUser` per account, one per account when nearly full.
@Suite("Chat stream shares")
struct ChatStreamSharesTests {
    typealias Decision = ChatStreamShares.Decision

    @Test(
        "admit: per-account cap, then one per account past nine tenths, then full",
        arguments: [
            // (capacity, per user, requests as account names, expected decisions)
            (100, 5, Array(repeating: "a", count: 6), [Decision](repeating: .admit, count: 5) + [.overUserCap]),
            // Capacity 10: pressure at 9. Two accounts take 4 each, a third gets one (the 9th), not a second;
            // "a", at 4 of 5, gets no fifth; the last place goes to a fourth account; then full for everyone.
            (
                10, 5, ["a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "a", "d", "e", "b"],
                [Decision](repeating: .admit, count: 9) + [.overFairShare, .overFairShare, .admit, .full, .full]
            ),
            // Tiny gateways keep at least one place for accounts with none.
            (2, 5, ["a", "a", "b", "c"], [.admit, .overFairShare, .admit, .full]),
            (1, 5, ["a", "b"], [.admit, .full]),
        ] as [(Int, Int, [String], [Decision])]
    )
    func admit(capacity: Int, perUser: Int, requests: [String], expected: [Decision]) {
        var shares = ChatStreamShares(capacity: capacity, perUser: perUser)
        #expect(requests.map { shares.admit($0) } == expected)
        #expect(shares.total == expected.filter { $0 == .admit }.count)
    }

    @Test("a released stream is the account's to take again, below the pressure line")
    func release() {
        var shares = ChatStreamShares(capacity: 10, perUser: 2)
        #expect(shares.admit("a") == .admit)
        #expect(shares.admit("a") == .admit)
        #expect(shares.admit("a") == .overUserCap)
        shares.release("a")
        #expect(shares.admit("a") == .admit)
        shares.release("a")
        shares.release("a")
        shares.release("a")  // one too many: ignored
        #expect(shares.total == 0 && shares.streams.isEmpty)
    }

    @Test(
        "accounts it takes to fill the gateway",
        arguments: [
            // The defaults: 32 connections × 100 streams, 5 per account → 576 accounts to the pressure line,
            // then 320 more one by one. With chat's cap of 10 alone it took 320.
            (3200, 5, 896), (3200, 10, 608), (100, 5, 28), (10, 5, 3),
        ]
    )
    func accountsToFill(capacity: Int, perUser: Int, expected: Int) {
        let shares = ChatStreamShares(capacity: capacity, perUser: perUser)
        #expect(shares.accountsToFill == expected)
        // And that many really fill it, greedily, while one account never holds more than its cap.
        var filling = shares
        var account = 0
        while filling.total < capacity {
            account += 1
            while filling.admit("user-\(account)") == .admit {}
        }
        #expect(account == expected)
        #expect(filling.streams.values.allSatisfy { $0 <= perUser })
    }

    @Test("the gateway's stream connections answer RESOURCE_EXHAUSTED with retry-after for an account's share")
    func connections() async throws {
        // Nothing is called on chat: the bodies only hold their place (clients connect on first use).
        let streams = ChatStreamConnections(
            connections: 1,
            perConnection: 10,
            perUser: 2,
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: 9),
            logger: Logger(label: "test.streams")
        )
        let held = HeldCount()
        func refusal(_ user: String) async -> RPCError? {
            do {
                try await streams.withClient(user: user) { _ in }
                return nil
            } catch {
                return error as? RPCError
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for (index, user) in ["a", "a", "b", "b", "c", "c", "d", "d", "e"].enumerated() {
                group.addTask {
                    try? await streams.withClient(user: user) { _ in
                        await held.increment()
                        try? await Task.sleep(for: .seconds(60))  // until cancelled
                    }
                }
                while await held.value <= index { await Task.yield() }
            }
            // 9 of 10 held: at the pressure line. "a" is at its cap, "e" over its share, "f" gets the last.
            let overCap = await refusal("a")
            #expect(overCap?.code == .resourceExhausted)
            #expect(overCap?.errorDetail?.reason == "RATE_LIMITED" && overCap?.errorDetail?.retryAfterMs == 10_000)
            let overShare = await refusal("e")
            #expect(overShare?.code == .resourceExhausted && overShare?.errorDetail?.retryAfterMs == 10_000)
            try? await streams.withClient(user: "f") { _ in
                // The tenth place is "f"'s: now nobody gets one.
                #expect(await refusal("g")?.code == .unavailable)
            }
            group.cancelAll()
        }
        // Every place was given back.
        try await streams.withClient(user: "a") { _ in }
        await streams.close()
    }
}

private actor HeldCount {
    var value = 0
    func increment() { self.value += 1 }
}
