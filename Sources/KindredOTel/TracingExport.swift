import KindredServiceKit
import KindredTracing
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Exports this process's spans over OTLP/HTTP (swift-otel) when the standard OpenTelemetry settings name an
/// endpoint; a server's `serve` runs inside ``run(_:)``.
///
/// Settings (environment; swift-otel reads them, as the OpenTelemetry specification defines them):
/// - `OTEL_EXPORTER_OTLP_ENDPOINT` (URL, unset by default): the collector, e.g. `http://127.0.0.1:4318`; spans
///   go to `<endpoint>/v1/traces`. `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` names the full traces URL instead.
///   Neither set: no export, no tracer installed, and the runtime makes no spans at all (`TraceSwitch`).
/// - `OTEL_SERVICE_NAME` (string, default the server's name: `gateway`, `match`…).
/// - `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`).
/// - `OTEL_BSP_SCHEDULE_DELAY` (ms, default 5000): how long finished spans wait to be sent in one batch.
/// - `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: off even with an endpoint.
/// Only traces are exported: metrics stay on the admin port (Prometheus), logs on stderr.
public struct TracingExport: Sendable {
    private let service: ServiceGroup

    /// Installs the OTLP tracer as the process's tracer and returns the export to run, or nil (nothing
    /// installed) when no endpoint is configured. Call once per process. Throws for settings swift-otel refuses.
    public static func bootstrap(serviceName: String, environment: [String: String], logger: Logger) throws
        -> TracingExport?
    {
        func isSet(_ key: String) -> Bool { !(environment[key] ?? "").trimmingCharacters(in: .whitespaces).isEmpty }
        guard isSet("OTEL_EXPORTER_OTLP_ENDPOINT") || isSet("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            environment["OTEL_SDK_DISABLED"]?.lowercased() != "true",
            environment["OTEL_TRACES_EXPORTER"]?.lowercased() != "none"
        else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.diagnosticLogger = .custom(logger)
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        TraceSwitch.turnOn()
        logger.notice("exporting traces over OTLP")
        return TracingExport(
            service: ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [.init(service: backend.service)], gracefulShutdownSignals: [], logger: logger)))
    }

    /// `ServeHooks.Around` for a server: serves inside the export when one is configured, else just serves.
    public static let around: ServeHooks.Around = { name, environment, logger, serve in
        guard let export = try TracingExport.bootstrap(serviceName: name, environment: environment, logger: logger) else {
            return try await serve()
        }
        try await export.run(serve)
    }

    /// Runs `body` with the exporter beside it; when `body` returns or throws, the spans still queued are sent
    /// (the exporter's graceful shutdown) before this returns.
    public func run(_ body: @escaping @Sendable () async throws -> Void) async throws {
        let service = self.service
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await service.run() }
            let outcome = await Result(catching: body)
            await service.triggerGracefulShutdown()
            try? await tasks.waitForAll()
            try outcome.get()
        }
    }
}

extension Result where Failure == any Error {
    fileprivate init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
