import Foundation
import KindredGRPC
import KindredServiceTesting
import Testing

@Suite("TestServer: any service on a private migrated database")
struct TestServerTests {
    @Test("each server gets its own database cloned from the migrated template")
    func ownDatabasePerServer() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("demo-migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "CREATE TABLE things (id bigint PRIMARY KEY); INSERT INTO things VALUES (1), (2);".write(
            to: folder.appendingPathComponent("0001_things.sql"), atomically: true, encoding: .utf8)
        let settings = ["KINDRED_DEMO_MIGRATIONS_DIR": folder.path]

        let first = try await TestServer<DemoServer>.start(settings: settings)
        let second = try await TestServer<DemoServer>.start(settings: settings)
        #expect(first.settings["KINDRED_DEMO_DATABASE_URL"] != second.settings["KINDRED_DEMO_DATABASE_URL"])
        let client = first.makeClient()
        #expect(try await client.unary(V1.InteropService.Method.echo, V1.EchoRequest()).message == "2")
        _ = try await first.server.database.execute("INSERT INTO things VALUES (3)")
        #expect(try await client.unary(V1.InteropService.Method.echo, V1.EchoRequest()).message == "3")
        let other = second.makeClient()
        #expect(try await other.unary(V1.InteropService.Method.echo, V1.EchoRequest()).message == "2")
        await client.close()
        await other.close()
        await first.stop()
        await second.stop()
    }
}
