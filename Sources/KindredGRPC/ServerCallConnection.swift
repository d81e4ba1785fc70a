import NIOCore

/// What a call's connection does for it, on the call's event loop: HTTP/2 (`ServerConnectionHandler`, many calls
/// per connection) or HTTP/1.1 (`HTTP1CallHandler`, one call at a time). `ServerCall` talks only to this, so
/// handlers, error mapping, deadlines and request ids are the same code on both.
protocol ServerCallConnection: AnyObject {
    /// Sends an encoded response message (the first one after the response headers).
    func sendMessage(_ encoded: ByteBuffer, on call: ServerCall)
    /// Resumes `continuation` with the next request message, nil at the request's end.
    func read(on call: ServerCall, continuation: CheckedContinuation<ByteBuffer?, any Error>)
    /// Resumes `continuation` once the call may queue more output.
    func waitUntilWritable(_ call: ServerCall, continuation: CheckedContinuation<Void, any Error>)
    /// Whether the call's handler may start now (see `HandlerAdmission`).
    func admitNow(_ call: ServerCall) -> Bool
    /// Resumes `continuation` with true once the handler may start, false to ask again.
    func askAdmission(_ call: ServerCall, continuation: CheckedContinuation<Bool, any Error>)
    /// Sends the call's status, once.
    func finish(_ call: ServerCall, error: RPCError?)
    /// The handler's task returned.
    func handlerFinished(_ call: ServerCall)
    /// The call's deadline passed (its timer, armed by `ServerCall.opened`, fired): it ends DEADLINE_EXCEEDED.
    func deadlineExceeded(_ call: ServerCall)
}
