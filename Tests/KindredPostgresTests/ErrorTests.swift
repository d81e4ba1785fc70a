import KindredPostgres
import KindredPostgresTesting
import Testing

@Suite struct ErrorTests {
    @Test func uniqueViolationNamesTheConstraintButNotTheSQLOrValues() async throws {
        try await withTestClient { client in
            try await client.execute(
                "CREATE TABLE accounts (id bigint PRIMARY KEY, email text CONSTRAINT accounts_email_key UNIQUE)"
            )
            let email = "secret.person@example.com"
            try await client.execute("INSERT INTO accounts VALUES (\(1), \(email))")
            let error = await #expect(throws: PostgresError.self) {
                try await client.execute("INSERT INTO accounts VALUES (\(2), \(email))")
            }
            let failure = try #require(error)
            #expect(failure.code == .uniqueViolation)
            #expect(failure.sqlState == "23505")
            #expect(failure.constraint == "accounts_email_key")
            #expect(failure.table == "accounts")
            #expect(!failure.isRetryable)
            #expect(!failure.description.contains("secret"))
            #expect(!failure.description.contains("INSERT"))
            #expect(!failure.description.contains("accounts VALUES"))
            #expect(failure.description.contains("accounts_email_key"))
            // The detail, for logs only, quotes the value.
            #expect(failure.serverDetail?.contains(email) == true)
            // The connection is still good.
            #expect(try await client.query("SELECT count(*) FROM accounts").scalar(Int.self) == 1)
        }
    }

    @Test func syntaxErrorsAreQueryFailedWithoutSQLInTheDescription() async throws {
        try await withTestClient { client in
            let error = await #expect(throws: PostgresError.self) {
                _ = try await client.query("SELEKT \("hidden-value")")
            }
            #expect(error?.code == .queryFailed)
            #expect(error?.sqlState == "42601")
            #expect(error.map { !$0.description.contains("SELEKT") && !$0.description.contains("hidden") } == true)
        }
    }

    @Test func statementTimeout() async throws {
        try await withTestClient(configure: { $0.statementTimeout = .milliseconds(200) }) { client in
            let start = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) {
                _ = try await client.query("SELECT pg_sleep(30)")
            }
            #expect(error?.code == .statementTimeout)
            #expect(error?.sqlState == "57014")
            // Far below the 30 s sleep; generous for loaded CI machines.
            #expect(ContinuousClock.now - start < .seconds(15))
            let afterwards = try await client.query("SELECT 1").scalar(Int32.self)
            #expect(afterwards == 1)
        }
    }

    @Test func cancellingTheTaskCancelsTheRunningStatement() async throws {
        try await withTestClient { client in
            try await expectCancellingTheTaskCancels { _ = try await client.query("SELECT pg_sleep(30)") }
            #expect(try await client.query("SELECT 2").scalar(Int32.self) == 2)
        }
    }

    @Test func lockTimeoutIsRetryable() async throws {
        try await withTestClient(configure: { $0.lockTimeout = .milliseconds(200) }) { client in
            try await client.execute("CREATE TABLE counters (id int PRIMARY KEY, value int)")
            try await client.execute("INSERT INTO counters VALUES (1, 0)")
            try await client.withTransaction { tx in
                try await tx.execute("SELECT * FROM counters WHERE id = 1 FOR UPDATE")
                let error = await #expect(throws: PostgresError.self) {
                    try await client.execute("UPDATE counters SET value = value + 1 WHERE id = 1")
                }
                #expect(error?.code == .lockTimeout)
                #expect(error?.isRetryable == true)
            }
        }
    }

    @Test func badConnectionStringsAndUnreachableServers() async throws {
        let malformed = #expect(throws: PostgresError.self) {
            _ = try PostgresConfiguration("postgresql://a b:secret@[")
        }
        #expect(malformed?.code == .invalidConfiguration)
        #expect(malformed.map { !$0.description.contains("secret") } == true)

        let keyValue = try PostgresConfiguration("host=/nowhere dbname=app user=svc password=hunter2 sslmode=disable")
        #expect(keyValue.database == "app")
        #expect(!keyValue.description.contains("hunter2"))
        let url = try PostgresConfiguration("postgresql://svc@/app?host=/run/pg&application_name=x")
        #expect(url.parameters["host"] == "/run/pg")
        #expect(url.parameters["user"] == "svc")

        let error = await #expect(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect(
                configuration: PostgresConfiguration(host: "/nonexistent-socket-dir", user: "x", database: "x"),
                logger: testLogger
            )
        }
        #expect(error?.code == .connectionFailed)
        #expect(error?.isRetryable == true)
    }

    @Test func sessionSettingsAreApplied() async throws {
        try await withTestClient(configure: {
            $0.statementTimeout = .milliseconds(1500)
            $0.lockTimeout = .seconds(3)
            $0.settings["search_path"] = "app, public"
        }) { client in
            let row = try await client.query(
                """
                SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),
                       current_setting('idle_in_transaction_session_timeout'), current_setting('search_path'),
                       current_setting('synchronous_commit'), current_setting('application_name'),
                       current_setting('client_encoding'), current_setting('plan_cache_mode')
                """
            )[0]
            let settings = try (0..<8).map { try row.decode(String.self, at: $0) }
            #expect(settings == ["1500ms", "3s", "30s", "app, public", "on", "kindred", "UTF8", "force_generic_plan"])
        }
    }
}
