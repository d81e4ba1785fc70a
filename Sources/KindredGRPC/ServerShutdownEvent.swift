/// Fired into every server channel to start a graceful shutdown.
struct ServerShutdownEvent: Sendable {
    let grace: Duration
}
