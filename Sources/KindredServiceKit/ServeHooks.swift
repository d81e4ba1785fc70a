import Logging

/// What runs around a server's `serve`: a server's executable sets it for the whole command
/// (`ServerCommand.runWithTracing()` in `KindredOTel` installs the OTLP trace export), so that only the servers link
/// the exporter — the kit, its tests and the tools built on it do not.
public enum ServeHooks {
    /// Runs `serve` for the server `name` with its environment and logger, and returns when it has.
    public typealias Around = @Sendable (
        _ name: String, _ environment: [String: String], _ logger: Logger,
        _ serve: @escaping @Sendable () async throws -> Void
    ) async throws -> Void

    @TaskLocal public static var around: Around?
}
