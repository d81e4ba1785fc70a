import KindredServiceKit

extension ServerCommand {
    /// `runFromCommandLine()`, with the server's spans exported over OTLP while it serves when the standard
    /// OpenTelemetry settings name an endpoint (``TracingExport``). A server's `main.swift` calls this.
    public static func runWithTracing() async {
        await ServeHooks.$hook.withValue(ServeHooks.Hook(TracingExport.around)) {
            await Self.runFromCommandLine()
        }
    }
}
