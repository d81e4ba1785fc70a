import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredPostgresTesting
import KindredServiceKit
import Logging
import Testing


@Suite("Settings: every server's listen, admin, TLS and database keys")
struct SettingsTests {
    @Test(
        "host:port values",
        arguments: [
            ("127.0.0.1:50051", HostPort(host: "127.0.0.1", port: 50051)),
            ("0.0.0.0:0", HostPort(host: "0.0.0.0", port: 0)),
            ("auth:50051", HostPort(host: "auth", port: 50051)),
            ("auth.kindred.svc.cluster.local:443", HostPort(host: "auth.kindred.svc.cluster.local", port: 443)),
            ("[::1]:50051", HostPort(host: "::1", port: 50051)),
            ("[fe80::1%eth0]:9", HostPort(host: "fe80::1%eth0", port: 9)),
        ] as [(String, HostPort)]
    )
    func goodAddresses(text: String, expected: HostPort) {
        #expect(HostPort(text) == expected)
    }

    @Test(
        "bad host:port values are refused",
        arguments: [
            "", "50051", ":50051", "localhost", "localhost:", "localhost:70000", "localhost:-1", "localhost:http",
            "::1:50051", "[::1]", "[]:80", "[localhost]:80", "a b:80", "host/path:80", "[::1:80", "résumé:80",
        ]
    )
    func badAddresses(text: String) {
        #expect(HostPort(text) == nil)
    }

    @Test("defaults follow the server's port; the admin port is 100 above")
    func endpointDefaults() throws {
        let endpoint = try DemoServer.endpoint(EnvironmentReader([:]))
        #expect(endpoint.listen == HostPort(host: "127.0.0.1", port: 50070))
        #expect(endpoint.adminListen == HostPort(host: "127.0.0.1", port: 50170))
        #expect(endpoint.tlsCertificateFile == nil && endpoint.accessLog)
        // Clients behind one NAT share an address: no penalty by address unless the operator turns it on.
        #expect(!endpoint.abusePenaltyByAddress)
        #expect(try endpoint.serverConfiguration().abusePenalty == nil)
        let database = try #require(try DemoServer.database(EnvironmentReader([:])))
        #expect(database.url == "postgresql:///kindred" && database.poolSize == 10)
        #expect(database.schema == "demo" && database.migrationsDirectory == "services/demo/migrations")
        #expect(database.applicationName == "kindred-demo")
    }

    @Test("values are read under the server's prefix")
    func endpointValues() throws {
        let settings = EnvironmentReader([
            "KINDRED_DEMO_LISTEN": "[::]:6000", "KINDRED_DEMO_ADMIN_LISTEN": "off",
            "KINDRED_DEMO_TLS_CERT_FILE": "/c.pem", "KINDRED_DEMO_TLS_KEY_FILE": "/k.pem",
            "KINDRED_DEMO_ACCESS_LOG": "false", "KINDRED_DEMO_DATABASE_URL": "postgresql://db/kindred",
            "KINDRED_DEMO_ABUSE_PENALTY_BY_ADDRESS": "true",
            "KINDRED_DEMO_DATABASE_POOL_SIZE": " 25 ", "KINDRED_DEMO_MIGRATIONS_DIR": "/app/migrations",
            "KINDRED_OTHER_LISTEN": "garbage",
        ])
        let endpoint = try DemoServer.endpoint(settings)
        #expect(endpoint.listen == HostPort(host: "::", port: 6000))
        #expect(endpoint.adminListen == nil && !endpoint.accessLog)
        #expect(endpoint.tlsCertificateFile == "/c.pem" && endpoint.tlsKeyFile == "/k.pem")
        #expect(endpoint.abusePenaltyByAddress)
        let database = try #require(try DemoServer.database(settings))
        #expect(database.url == "postgresql://db/kindred" && database.poolSize == 25)
        #expect(database.migrationsDirectory == "/app/migrations")
    }

    @Test("the abuse penalty by address is the operator's choice")
    func abusePenaltyByAddress() throws {
        let on = try DemoServer.endpoint(EnvironmentReader(["KINDRED_DEMO_ABUSE_PENALTY_BY_ADDRESS": "on"]))
        #expect(try on.serverConfiguration().abusePenalty == PenaltyBox.Configuration())
        let off = try DemoServer.endpoint(EnvironmentReader(["KINDRED_DEMO_ABUSE_PENALTY_BY_ADDRESS": "false"]))
        #expect(try off.serverConfiguration().abusePenalty == nil)
    }

    @Test(
        "a bad value names its key (never the value)",
        arguments: [
            ("KINDRED_DEMO_LISTEN", "localhost:70000"),
            ("KINDRED_DEMO_LISTEN", "::1:50051"),
            ("KINDRED_DEMO_LISTEN", "s3cr3t-garbage"),
            ("KINDRED_DEMO_ADMIN_LISTEN", "on"),
            ("KINDRED_DEMO_ACCESS_LOG", "maybe"),
            ("KINDRED_DEMO_ABUSE_PENALTY_BY_ADDRESS", "sometimes"),
            ("KINDRED_DEMO_TLS_CERT_FILE", "/only-the-cert.pem"),
            ("KINDRED_DEMO_DATABASE_POOL_SIZE", "0"),
            ("KINDRED_DEMO_DATABASE_POOL_SIZE", "ten"),
            ("KINDRED_DEMO_DATABASE_POOL_SIZE", "100000"),
            ("KINDRED_DEMO_DATABASE_URL", "s3cr3t password only"),
        ] as [(String, String)]
    )
    func badValues(key: String, value: String) throws {
        let settings = EnvironmentReader([key: value])
        let error = try #require(
            throws: ConfigurationError.self,
            performing: {
                _ = try DemoServer.endpoint(settings)
                _ = try DemoServer.database(settings)
            }
        )
        #expect(error.key == key)
        // The message may not repeat what was given (it may be a secret); short values such as "0" can occur
        // in the text of the rule ("1...500") by chance.
        if value.count > 3 { #expect(!error.description.contains(value)) }
    }

    @Test("migrate applies the server's migrations with only the database settings, once")
    func migrateWithDatabaseSettingsOnly() async throws {
        let postgres = try await TestPostgres.shared()
        let name = "kit_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        _ = try await postgres.createDatabase(name)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kit-migrations-\(name)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "CREATE TABLE things (id bigint PRIMARY KEY);".write(
            to: folder.appendingPathComponent("0001_things.sql"), atomically: true, encoding: .utf8)

        let settings = EnvironmentReader([
            "KINDRED_DEMO_DATABASE_URL": "postgresql://\(postgres.user)@/\(name)?host=\(postgres.directory)&port=\(postgres.port)",
            "KINDRED_DEMO_MIGRATIONS_DIR": folder.path,
            // Everything else a server might need is broken: migrate must not read it.
            "KINDRED_DEMO_LISTEN": "garbage",
        ])
        let database = try #require(try DemoServer.database(settings))
        let logger = Logger(label: "test.migrate")
        #expect(try await database.migrate(logger: logger).map(\.version) == [1])
        #expect(try await database.migrate(logger: logger).isEmpty)

        let client = try database.makeClient(logger: logger)
        let rows = try await client.query("SELECT count(*) FROM demo.things")
        #expect(try rows[0].decode(Int.self, at: 0) == 0)
        await client.shutdown()
    }
}

/// The settings every service reads alike under its own prefix: how it reaches auth and where its events go.
@Suite struct SharedServiceSettingsTests {
    @Test(arguments: ["chat", "discovery", "match", "profile"])
    func authAndEventsUnderTheServersPrefix(server: String) throws {
        let prefix = "KINDRED_\(server.uppercased())_"
        let secret = String(repeating: "s", count: 32)
        let reader = EnvironmentReader([
            prefix + "AUTH_ADDRESS": "auth:60051", prefix + "SERVICE_SECRET": secret,
            prefix + "REVOCATION_STALE_MS": "9000", prefix + "EVENT_CONSUMERS": "chat=chat:50055",
            prefix + "EVENT_POLL_MS": "250",
        ])
        let auth = try AuthClientSettings(server: server, environment: reader)
        #expect(auth.address == ServiceAddress(host: "auth", port: 60051))
        #expect(auth.serviceSecret == secret)
        #expect(auth.revocationStaleAfter == .milliseconds(9000))
        let events = try EventRelaySettings(server: server, environment: reader)
        #expect(events.consumers == [EventConsumer(name: "chat", host: "chat", port: 50055)])
        #expect(events.pollInterval == .milliseconds(250))
        // Another server's keys are not this one's.
        let other = try AuthClientSettings(server: server == "chat" ? "match" : "chat", environment: reader)
        #expect(other == AuthClientSettings())
    }

    @Test(arguments: [
        ("REVOCATION_STALE_MS", "1999"), ("REVOCATION_STALE_MS", "60001"),
        ("AUTH_ADDRESS", "no-port"), ("EVENT_POLL_MS", "9"), ("EVENT_CONSUMERS", "chat"),
    ])
    func badValuesNameTheKey(key: String, value: String) {
        let reader = EnvironmentReader(["KINDRED_MATCH_" + key: value])
        do {
            _ = try AuthClientSettings(server: "match", environment: reader)
            _ = try EventRelaySettings(server: "match", environment: reader)
            Issue.record("KINDRED_MATCH_\(key)=\(value) was accepted")
        } catch let error as ConfigurationError {
            #expect(error.key == "KINDRED_MATCH_" + key)
        } catch {
            Issue.record("\(error)")
        }
    }
}

@Suite struct EventConsumerServiceTests {
    @Test("A consumer named <service>_<n> (a discovery shard) is delivered to its service's DeliverEvents")
    func shardConsumersShareTheirServicesRPC() throws {
        let consumers = try EventConsumer.parseList("discovery=d:1,discovery_2=d:2,notify=n:3,some_name=s:4", key: "K")
        #expect(consumers.map(\.grpcService) == [
            "kindred.discovery.v1.DiscoveryService", "kindred.discovery.v1.DiscoveryService",
            "kindred.notify.v1.NotifyService", "kindred.some_name.v1.Some_nameService",
        ])
    }

    @Test("Discovery's shard setting parses and a shard router takes one address per shard in order")
    func shardAddresses() throws {
        let reader = EnvironmentReader(["K": "a:1, b:2,c:3", "BAD": "a:1,nonsense"])
        #expect(try DiscoveryShardRouter.addresses(reader, "K") == [
            ServiceAddress(host: "a", port: 1), ServiceAddress(host: "b", port: 2), ServiceAddress(host: "c", port: 3),
        ])
        #expect(try DiscoveryShardRouter.addresses(reader, "UNSET") == nil)
        #expect(throws: ConfigurationError.self) { try DiscoveryShardRouter.addresses(reader, "BAD") }
    }
}
