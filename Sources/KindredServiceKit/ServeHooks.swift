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

    /// A hook around `serve`. A struct rather than the bare function: with a task-local of a function type Swift
    /// 6.3's optimiser passed no type metadata to `withValue`, so every release-built server crashed at start
    /// (`swift_task_localValuePush`, a bad pointer at -8); a nominal type is passed correctly.
    public struct Hook: Sendable {
        public let around: Around

        public init(_ around: @escaping Around) {
            self.around = around
        }
    }

    @TaskLocal public static var hook: Hook?
}
