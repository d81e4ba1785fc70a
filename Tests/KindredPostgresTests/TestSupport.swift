import KindredPostgres
import KindredPostgresTesting
import Logging

/// Every test gets a fresh database on the process-wide test server.
func withTestClient<T>(
    pool: PostgresClient.PoolConfiguration = PostgresClient.PoolConfiguration(),
    configure: (inout PostgresConfiguration) -> Void = { _ in },
    _ body: (PostgresClient) async throws -> T
) async throws -> T {
    let server = try await TestPostgres.shared()
    var configuration = try await server.createDatabase()
    configure(&configuration)
    let client = PostgresClient(configuration: configuration, pool: pool, logger: testLogger)
    do {
        let value = try await body(client)
        await client.shutdown()
        return value
    } catch {
        await client.shutdown()
        throw error
    }
}

let testLogger: Logger = {
    var logger = Logger(label: "kindred.postgres.tests")
    logger.logLevel = .warning
    return logger
}()
