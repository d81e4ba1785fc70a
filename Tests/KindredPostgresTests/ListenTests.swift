import KindredPostgres
import Testing

@Suite struct ListenTests {
    @Test func notificationsArriveInOrder() async throws {
        try await withTestClient { client in
            // Mixed case and a space: the channel name must be quoted, not folded or split.
            let events = try await client.listen(channel: "Chat Events")
            let other = try await client.listen(channel: "other")
            for number in 0..<50 {
                try await client.notify(channel: "Chat Events", payload: "message \(number)")
            }
            try await client.notify(channel: "other", payload: "elsewhere")
            var received: [String] = []
            for try await notification in events {
                #expect(notification.channel == "Chat Events")
                received.append(notification.payload)
                if received.count == 50 { break }
            }
            #expect(received == (0..<50).map { "message \($0)" })
            var otherIterator = other.makeAsyncIterator()
            #expect(try await otherIterator.next()?.payload == "elsewhere")
        }
    }

    @Test func notificationsSentInATransactionArriveOnCommitOnly() async throws {
        try await withTestClient { client in
            let events = try await client.listen(channel: "tx")
            struct Abort: Error {}
            _ = try? await client.withTransaction { tx in
                try await tx.execute("SELECT pg_notify('tx', 'rolled back')")
                throw Abort()
            }
            try await client.withTransaction { tx in
                try await tx.execute("SELECT pg_notify('tx', 'committed')")
            }
            var iterator = events.makeAsyncIterator()
            #expect(try await iterator.next()?.payload == "committed")
        }
    }

    @Test func aListenerStopsWhenItsConsumerGoesAway() async throws {
        try await withTestClient { client in
            let consumer = Task {
                let events = try await client.listen(channel: "gone")
                for try await _ in events {}
            }
            // Wait (up to 20 s on a loaded machine) until the listener's LISTEN is visible.
            var listening = 0
            for _ in 0..<400 where listening == 0 {
                try await Task.sleep(for: .milliseconds(50))
                listening = try await client.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"gone\"'"
                ).scalar(Int.self)
            }
            #expect(listening == 1)
            consumer.cancel()
            _ = try? await consumer.value
            var remaining = 1
            for _ in 0..<400 where remaining > 0 {
                try await Task.sleep(for: .milliseconds(20))
                remaining = try await client.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"gone\"'"
                ).scalar(Int.self)
            }
            #expect(remaining == 0)
        }
    }
}
