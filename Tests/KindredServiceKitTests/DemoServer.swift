import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

typealias V1 = Kindred.Testing.V1

/// A server definition for the tests: settings under `KINDRED_DEMO_`, schema `demo`; its Echo answers with the
/// number of rows in `demo.things`, so a test sees the server, its settings and its database working together.
enum DemoServer: ServerDefinition {
    static let name = "demo"
    static let summary = "A server for tests."
    static let defaultPort = 50070
    static let schema: String? = "demo"

    static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> DemoInstance {
        let endpoint = try Self.endpoint(settings)
        let database = try Self.database(settings)!.makeClient(logger: logger)
        var runner = ServerRunner(configuration: try endpoint.serverConfiguration(), services: [CountingService(database: database)])
        runner.admin = endpoint.adminConfiguration
        return DemoInstance(runner: runner, database: database)
    }
}

struct DemoInstance: ServiceServer {
    let runner: ServerRunner
    let database: PostgresClient
    func shutdown() async { await self.database.shutdown() }
}

private struct CountingService: GRPCService {
    let database: PostgresClient

    func register(in router: inout GRPCRouter) {
        router.unary(V1.InteropService.Method.echo) { _, _ in
            let rows = try await self.database.query("SELECT count(*) FROM things")
            var response = V1.EchoResponse()
            response.message = String(try rows[0].decode(Int.self, at: 0))
            return response
        }
    }
}
