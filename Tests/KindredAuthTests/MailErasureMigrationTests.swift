import Foundation
import KindredAuth
import KindredPostgres
import KindredServiceKit
import Logging
import Testing

/// Migration 0004 on a database that already has mail: sent and failed rows lose their address and body (link or
/// code), pending ones keep them for the relay; every row gets its address hash and template.
@Suite("Migration 0004: existing mail")
struct MailErasureMigrationTests {
    @Test func existingRowsAreErased() async throws {
        let url = try await TestEnvironment.shared.makeEmptyDatabase()
        var configuration = try PostgresConfiguration(url)
        configuration.settings["search_path"] = "auth"
        configuration.statementTimeout = .seconds(60)  // the migrations run beside dozens of other tests
        let database = PostgresClient(configuration: configuration, logger: Logger(label: "kindred.auth.tests"))
        var settings = DatabaseSettings(server: "auth", schema: "auth")
        settings.migrationsDirectory = TestEnvironment.migrations
        let all = try settings.migrator()
        let logger = Logger(label: "kindred.auth.tests")
        _ = try await PostgresMigrator(schema: "auth", migrations: all.migrations.filter { $0.version < 4 })
            .migrate(on: database, logger: logger)
        let link = "https://kindred.invalid/reset-password?token=SECRET-TOKEN-123"
        for (subject, sent, failed) in [
            ("Reset your password", true, false), ("Confirm your email address", false, true),
            ("Confirm your new email address", false, false),
        ] {
            try await database.execute(
                """
                INSERT INTO mail_outbox (recipient, subject, text_body, sent_at, failed_at)
                VALUES ('ann@example.com', \(subject), \(link), \(sent ? PostgresTimestamp.now : nil),
                        \(failed ? PostgresTimestamp.now : nil))
                """
            )
        }
        _ = try await all.migrate(on: database, logger: logger)
        let rows = try await database.query(
            """
            SELECT template, recipient, text_body, recipient_hash = sha256(convert_to('ann@example.com', 'UTF8'))
            FROM mail_outbox ORDER BY id
            """
        )
        let decoded = try rows.map { try $0.decode((String, String?, String?, Bool).self) }
        #expect(decoded.map(\.0) == ["password_reset", "verify_email", "email_change_confirmation"])
        #expect(decoded.map(\.3) == [true, true, true])
        #expect(decoded[0].1 == nil && decoded[0].2 == nil)
        #expect(decoded[1].1 == nil && decoded[1].2 == nil)
        #expect(decoded[2].1 == "ann@example.com" && decoded[2].2 == link)  // still to be sent
        await database.shutdown()
    }
}
