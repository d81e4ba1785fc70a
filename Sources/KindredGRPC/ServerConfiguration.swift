import KindredHTTP2
import KindredOpenSSL
import Logging
import NIOCore

/// Configuration of a gRPC server. Defaults follow DESIGN.md §6 and gRPC's own defaults.
public struct GRPCServerConfiguration: Sendable {
    /// Address to listen on. Default 127.0.0.1.
    public var host: String = "127.0.0.1"
    /// Port to listen on; 0 picks a free one (see `GRPCServer.localAddress`). Default 0.
    public var port: Int = 0
    /// TLS (ALPN h2) when set; plaintext h2c with prior knowledge otherwise.
    public var tls: TLSContext?
    /// HTTP/2 settings and abuse limits (max concurrent streams 100, reset/CONTINUATION/SETTINGS limits).
    public var http2 = HTTP2Configuration()
    /// Largest request message accepted, in bytes; larger ones fail with RESOURCE_EXHAUSTED. Default 4 MiB.
    public var maxReceiveMessageSize: Int = 4 << 20
    /// A connection with no call for this long is closed with GOAWAY. Default 5 minutes.
    public var idleTimeout: Duration? = .seconds(300)
    /// A connection older than this is asked to go away (GOAWAY) and closed after `maxConnectionAgeGrace`.
    /// Default: no limit.
    public var maxConnectionAge: Duration? = nil
    /// How long calls may finish after the max-age GOAWAY. Default 30 s.
    public var maxConnectionAgeGrace: Duration = .seconds(30)
    /// Graceful shutdown (server stopping, max age) sends GOAWAY with the maximum stream id and a PING, and the
    /// final GOAWAY (the real last stream id) once the PING is answered, or after this long. Default 1 s.
    public var shutdownPingTimeout: Duration = .seconds(1)
    /// After this long without receiving anything, the server PINGs the client. Default 2 hours (gRPC's).
    public var keepaliveTime: Duration = .seconds(7200)
    /// A keepalive PING not answered within this closes the connection. Default 20 s.
    public var keepaliveTimeout: Duration = .seconds(20)
    /// Client PINGs closer together than this count as a strike. Default 5 minutes (gRPC's).
    public var minPingInterval: Duration = .seconds(300)
    /// Whether clients may PING while no call is active.
    public var permitPingWithoutCalls: Bool = false
    /// Strikes tolerated before GOAWAY ENHANCE_YOUR_CALM. Default 2.
    public var maxPingStrikes: Int = 2
    /// Outbound bytes queued per stream above which a writer waits (backpressure). Default 256 KiB.
    public var outboundHighWatermark: Int = 256 << 10
    /// Outbound bytes queued on all streams of a connection above which every streaming writer of the
    /// connection waits before it frames its next message (a peer that keeps its windows shut on 100
    /// streams then holds one connection's worth, not 100 × the watermark). Default 4 MiB.
    public var connectionOutboundHighWatermark: Int = 4 << 20
    /// Most bytes taken from nghttp2 per write while the socket is writable. Output is pulled only while the
    /// channel is writable (NIO's write buffer under 64 KiB) and the socket is not read while it is not, so
    /// one connection never has more than this plus 64 KiB queued in NIO; the rest stays bounded inside
    /// nghttp2 (flow control, `outboundHighWatermark`, `HTTP2Configuration.maxOutboundAcks`). Default 64 KiB.
    public var outboundFlushLimit: Int = 64 << 10
    /// A connection whose output stays blocked (the peer does not read) this long is closed. Default 30 s.
    public var writeStallTimeout: Duration? = .seconds(30)
    /// The client preface and first SETTINGS frame must arrive within this. Default 10 s (Go's).
    public var handshakeTimeout: Duration? = .seconds(10)
    /// A connection that has not opened any stream this long after connecting is closed with GOAWAY (the
    /// general `idleTimeout` applies after its first request). Default 30 s.
    public var firstRequestTimeout: Duration? = .seconds(30)
    /// A unary request's body (headers to END_STREAM), or one message of a streaming request (first byte to
    /// last), must arrive within this; otherwise the call fails with RESOURCE_EXHAUSTED and the stream is
    /// reset. Streams idle between messages are not affected. Default 30 s.
    public var requestBodyTimeout: Duration? = .seconds(30)
    /// Per-connection budget of frames that cost work without carrying any (empty DATA, tiny WINDOW_UPDATEs,
    /// SETTINGS, resets, refused streams, oversized header blocks; PINGs have their strikes); running out ends the connection
    /// with GOAWAY ENHANCE_YOUR_CALM. Default burst 1000, refill 33/s.
    public var abuseBudget = HTTP2AbuseBudget.Configuration()
    /// When set, new connections from an address whose connection was closed for abuse are refused (or held,
    /// see `abuseTarpit`) for a growing penalty (`PenaltyBox.Configuration()`: 1 s, doubling to 60 s, forgotten
    /// after 10 min quiet, 4096 addresses). Default nil: never refused by address. Behind a carrier NAT or an L4
    /// load balancer many clients share one address, and a penalty by address would cut all of them off for the
    /// attacker's abuse; the abusive connection itself is ended by `abuseBudget` and the PING strikes either way.
    /// Set it only where addresses are known not to be shared.
    public var abusePenalty: PenaltyBox.Configuration? = nil
    /// While its address is penalised (only with `abusePenalty`), a new connection is held (accepted, never read
    /// nor answered) until the penalty ends (at most 60 s), 256 connections at most; beyond them, or when nil, it
    /// is refused at once. A reconnecting attacker then waits instead of spinning through refused connections.
    public var abuseTarpit: AbuseTarpit.Configuration? = AbuseTarpit.Configuration()
    /// When set, every finished call is logged at this level (method, status, duration, request id, peer).
    /// Default nil: no per-call log line (benchmarks, the interop server).
    public var accessLogLevel: Logger.Level? = nil
    /// gRPC-Web and Connect (binary, and JSON with a codec) beside gRPC on the same port and handlers, with CORS
    /// for browsers (see `WebProtocols`). Default nil: gRPC only (internal servers).
    public var web: WebProtocols? = nil
    /// What a caller's W3C trace context (`traceparent`, `tracestate`) does to its call's server span while tracing
    /// is on. Default `.continued` (servers whose callers are the cluster's own).
    public var callerTrace: CallerTrace = .continued

    public init() {}
}

/// How a server span treats the trace context its caller sent (see `GRPCServerConfiguration.callerTrace`).
public enum CallerTrace: Sendable {
    /// The span is the caller's child: in its trace, under its sampling decision (the `sampled` flag).
    case continued
    /// The span starts a trace of its own, kept or dropped by this process's sampler, with a link to the caller's
    /// span: for a public edge, where a client's `sampled` flag must not make the cluster record every call it
    /// makes, and whose trace id must not name the cluster's traces. The client's trace still finds the call.
    case linked
}
