import Foundation
import KindredPostgres
import KindredPostgresTesting
import KindredServiceKit
import KindredServiceTesting
import Testing

/// Every producer copies ``Outbox/schemaSQL`` and every consumer ``EventInbox/schemaSQL`` into a numbered
/// migration of its own. The relay's and the inbox's SQL assume those exact tables, so a copy that drifts
/// (a column renamed, a default or an index lost) breaks delivery only at run time. These tests migrate each
/// service's real folder and compare its `events_*` tables with the kit's, column by column and index by
/// index. A service may add indexes of its own; it may not lose or change one of the kit's.
@Suite struct EventsSchemaDriftTests {
    static let producers = ["auth", "profile", "match", "chat"]
    static let consumers = ["profile", "discovery", "match", "chat"]

    @Test(arguments: Self.producers)
    func producerOutboxTablesAreTheKits(service: String) async throws {
        try await Self.compare(service: service, with: Outbox.schemaSQL, name: "outbox")
    }

    @Test(arguments: Self.consumers)
    func consumerInboxTableIsTheKits(service: String) async throws {
        try await Self.compare(service: service, with: EventInbox.schemaSQL, name: "inbox")
    }

    /// A service whose migrations create no `events_*` table at all is a fixture mistake, not a pass.
    @Test func theReferenceSchemasHaveTheTablesTheRelayAndInboxUse() async throws {
        let outbox = try await Self.structure(ofReference: Outbox.schemaSQL, name: "outbox")
        #expect(Set(outbox.columns.keys) == ["events_outbox", "events_partitions", "events_consumers", "events_cursors"])
        let inbox = try await Self.structure(ofReference: EventInbox.schemaSQL, name: "inbox")
        #expect(Set(inbox.columns.keys) == ["events_inbox"])
    }

    // MARK: Support

    /// The shape of a schema's `events_*` tables: per table, its columns (name, type, null, default; order
    /// ignored, since auth added columns by ALTER TABLE) and its indexes and constraints, with the schema name
    /// removed so two schemas compare equal.
    struct Structure: Equatable {
        var columns: [String: Set<String>] = [:]
        var indexes: [String: Set<String>] = [:]
        var constraints: [String: Set<String>] = [:]
    }

    static func compare(service: String, with referenceSQL: String, name: String) async throws {
        let reference = try await self.structure(ofReference: referenceSQL, name: name)
        let postgres = try await TestPostgres.shared()
        let root = TestServerSupport.repositoryRoot()
        let url = try await postgres.createMigratedDatabase(
            schema: service, migrations: root + "/services/\(service)/migrations")
        let migrated = try await self.structure(url: url, schema: service, tables: Set(reference.columns.keys))
        for table in reference.columns.keys.sorted() {
            #expect(migrated.columns[table] == reference.columns[table], "\(service).\(table): columns differ from the kit's")
            let missing = reference.indexes[table, default: []].subtracting(migrated.indexes[table, default: []])
            #expect(missing.isEmpty, "\(service).\(table) lacks the kit's indexes: \(missing.sorted())")
            #expect(
                migrated.constraints[table] == reference.constraints[table],
                "\(service).\(table): constraints differ from the kit's")
        }
    }

    static func structure(ofReference sql: String, name: String) async throws -> Structure {
        let postgres = try await TestPostgres.shared()
        let schema = "kit_" + name
        let configuration = try await postgres.createDatabase()
        let client = PostgresClient(configuration: configuration, logger: testLogger)
        do {
            _ = try await PostgresMigrator(
                schema: schema, migrations: [PostgresMigration(version: 1, name: name, sql: sql)]
            ).migrate(on: client, logger: testLogger)
            let structure = try await self.structure(client: client, schema: schema, tables: nil)
            await client.shutdown()
            return structure
        } catch {
            await client.shutdown()
            throw error
        }
    }

    static func structure(url: String, schema: String, tables: Set<String>) async throws -> Structure {
        let client = PostgresClient(configuration: try PostgresConfiguration(url), logger: testLogger)
        do {
            let structure = try await self.structure(client: client, schema: schema, tables: tables)
            await client.shutdown()
            return structure
        } catch {
            await client.shutdown()
            throw error
        }
    }

    static func structure(client: PostgresClient, schema: String, tables: Set<String>?) async throws -> Structure {
        var structure = Structure()
        let prefix = schema + "."
        let columns = try await client.query(
            """
            SELECT c.relname, a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                   || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
                   || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
              FROM pg_attribute a
              JOIN pg_class c ON c.oid = a.attrelid
              JOIN pg_namespace n ON n.oid = c.relnamespace
              LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE n.nspname = \(schema) AND c.relkind = 'r' AND c.relname LIKE 'events\\_%'
               AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY c.relname, a.attnum
            """)
        for row in columns {
            let (table, column) = try row.decode((String, String).self)
            guard tables?.contains(table) ?? true else { continue }
            structure.columns[table, default: []].insert(column.replacingOccurrences(of: prefix, with: ""))
        }
        let indexes = try await client.query(
            """
            SELECT tablename, indexname || ': ' || indexdef FROM pg_indexes
             WHERE schemaname = \(schema) AND tablename LIKE 'events\\_%'
            """)
        for row in indexes {
            let (table, index) = try row.decode((String, String).self)
            guard tables?.contains(table) ?? true else { continue }
            structure.indexes[table, default: []].insert(index.replacingOccurrences(of: prefix, with: ""))
        }
        let constraints = try await client.query(
            """
            SELECT c.relname, k.conname || ': ' || pg_get_constraintdef(k.oid)
              FROM pg_constraint k
              JOIN pg_class c ON c.oid = k.conrelid
              JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = \(schema) AND c.relname LIKE 'events\\_%'
            """)
        for row in constraints {
            let (table, constraint) = try row.decode((String, String).self)
            guard tables?.contains(table) ?? true else { continue }
            structure.constraints[table, default: []].insert(constraint.replacingOccurrences(of: prefix, with: ""))
        }
        return structure
    }
}
