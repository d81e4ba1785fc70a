import Testing

@testable import KindredGateway

/// Where the gateway puts chat Subscribe streams: least-used connection first, at most `perConnection` each.
@Suite("Chat stream slots")
struct ChatStreamSlotsTests {
    @Test(
        "acquire picks the least-used connection and refuses when all are full",
        arguments: [
            // (connections, per connection, acquisitions, expected indexes (nil = refused), open afterwards)
            (1, 2, 3, [0, 0, nil], [2]),
            (3, 1, 4, [0, 1, 2, nil], [1, 1, 1]),
            (2, 100, 5, [0, 1, 0, 1, 0], [3, 2]),
            (0, 1, 2, [0, nil], [1]),  // at least one connection
        ] as [(Int, Int, Int, [Int?], [Int])])
    func acquire(connections: Int, perConnection: Int, count: Int, expected: [Int?], open: [Int]) {
        var slots = ChatStreamSlots(connections: connections, perConnection: perConnection)
        #expect((0..<count).map { _ in slots.acquire() } == expected)
        #expect(slots.open == open)
    }

    @Test("a released place is taken again, on the connection it freed")
    func release() {
        var slots = ChatStreamSlots(connections: 2, perConnection: 1)
        #expect(slots.acquire() == 0)
        #expect(slots.acquire() == 1)
        #expect(slots.acquire() == nil)
        slots.release(1)
        #expect(slots.acquire() == 1)
        #expect(slots.open == [1, 1])
    }
}
