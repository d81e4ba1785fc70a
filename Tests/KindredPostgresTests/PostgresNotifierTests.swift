import KindredPostgres
import KindredPostgresTesting
import Testing

@Suite struct PostgresNotifierTests {
    @Test func aQueuedNotificationIsSentAfterItsTransactionCommitsAndNeverForARollback() async throws {
        try await withTestClient { client in
            try await client.execute("CREATE TABLE notes (id int PRIMARY KEY)")
            let events = try await client.listen(channel: "notes")
            struct Abort: Error {}
            _ = try? await client.withTransaction { tx in
                try await tx.execute("INSERT INTO notes VALUES (1)")
                tx.queueNotification(channel: "notes", payload: "1")
                throw Abort()
            }
            try await client.withTransaction { tx in
                try await tx.execute("INSERT INTO notes VALUES (2)")
                tx.queueNotification(channel: "notes", payload: "2")
            }
            // Committed with the transaction's last statements, then queued: sent at once.
            try await client.withTransaction { tx in
                _ = try await tx.commit(after: ["INSERT INTO notes VALUES (3)"])
                tx.queueNotification(channel: "notes", payload: "3")
            }
            // One PostgreSQL would refuse is dropped and counted, and holds back nothing.
            client.queueNotification(channel: "notes", payload: String(repeating: "x", count: 8000))
            client.queueNotification(channel: "notes", payload: "4")
            var heard: [String] = []
            for try await notification in events {
                heard.append(notification.payload)
                // What a notification announces is committed when it arrives.
                let id = Int(notification.payload)!
                let stored = try await client.query("SELECT count(*) FROM notes WHERE id = \(id)").scalar(Int.self)
                #expect(stored == (id == 4 ? 0 : 1))
                if heard.count == 3 { break }
            }
            #expect(heard == ["2", "3", "4"])
            #expect(client.statistics.notificationsSent == 3)
            #expect(client.statistics.notificationsDropped == 1)
        }
    }

    /// While the database cannot be reached the queue holds at most 100,000 notifications beside the batch in hand
    /// (at most 1,000); older ones are dropped and counted, and shutting down gives up on the rest after its timeout.
    @Test func aQueueThatCannotBeSentIsBoundedAndCounted() async throws {
        var configuration = PostgresConfiguration(host: "/nonexistent-kindred-socket", user: "nobody", database: "none")
        configuration.connectTimeout = .seconds(1)
        let client = PostgresClient(configuration: configuration, logger: testLogger)
        for number in 0..<110_000 { client.queueNotification(channel: "lost", payload: "\(number)") }
        try await Task.sleep(for: .milliseconds(200))
        let statistics = client.statistics
        #expect(statistics.notificationsQueued + statistics.notificationsDropped == 110_000)
        #expect((100_000...101_000).contains(statistics.notificationsQueued))
        #expect(statistics.notificationsSent == 0)
        let started = ContinuousClock.now
        await client.shutdown()
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    /// PostgreSQL serialises the commits of transactions that sent a NOTIFY (one lock for the whole server, held until
    /// each commit is flushed, and here until a synchronous standby that never answers confirms it). A transaction
    /// that queues its notification commits while another notifying commit holds that lock; one that sends
    /// `pg_notify` itself waits behind it (here until its lock timeout). Its notification follows once the lock is
    /// free.
    @Test func aTransactionThatQueuesItsNotificationDoesNotWaitForOtherNotifyingCommits() async throws {
        let server = try await TestPostgres.start()
        do {
            var configuration = server.configuration()
            configuration.lockTimeout = .milliseconds(500)
            // Our commits are flushed here, not sent to the standby that the blocker's commit waits for.
            configuration.settings["synchronous_commit"] = "local"
            let client = PostgresClient(configuration: configuration, logger: testLogger)
            try await client.execute("CREATE TABLE notes (id int PRIMARY KEY)")
            try await client.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
            _ = try await client.query("SELECT pg_reload_conf()")
            let events = try await client.listen(channel: "notes")

            // The blocker: a notifying commit that waits for the standby, holding the lock.
            let blocker = try await PostgresConnection.connect(configuration: server.configuration(), logger: testLogger)
            let blockerPID = blocker.backendPID
            let blocked = Task {
                try await blocker.pipeline([
                    "BEGIN", "INSERT INTO notes VALUES (0)", "SELECT pg_notify('notes', '0')", "COMMIT",
                ])
            }
            var waiting = false
            for _ in 0..<400 where !waiting {
                try await Task.sleep(for: .milliseconds(25))
                waiting = try await client.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = \(blockerPID) AND wait_event = 'SyncRep'"
                ).scalar(Int.self) == 1
            }
            #expect(waiting)

            // Sending pg_notify in the transaction: waits for the lock until the lock timeout.
            await #expect(throws: PostgresError.self) {
                try await client.withTransaction { tx in
                    try await tx.execute("INSERT INTO notes VALUES (1)")
                    try await tx.execute("SELECT pg_notify('notes', '1')")
                }
            }
            // Queued: commits at once.
            try await client.withTransaction { tx in
                try await tx.execute("INSERT INTO notes VALUES (2)")
                tx.queueNotification(channel: "notes", payload: "2")
            }
            #expect(try await client.query("SELECT string_agg(id::text, ',' ORDER BY id) FROM notes").scalar(String.self) == "2")

            // The blocker's wait is cancelled (its commit stands, locally): the lock is free, the notification goes.
            _ = try await client.query("SELECT pg_cancel_backend(\(blockerPID))")
            _ = try? await blocked.value
            var heard: [String] = []
            for try await notification in events {
                heard.append(notification.payload)
                if heard.count == 2 { break }
            }
            #expect(heard == ["0", "2"])
            blocker.close()
            await client.shutdown()
        } catch {
            try await server.stop()
            throw error
        }
        try await server.stop()
    }
}
