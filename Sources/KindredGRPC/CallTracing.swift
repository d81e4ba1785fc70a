import KindredHTTP2
import KindredTracing
import Tracing

/// Spans of gRPC calls (OpenTelemetry's RPC conventions): one per server call, started from the caller's
/// `traceparent`/`tracestate` metadata, and one per client call, whose context goes out in the same two keys.
/// Named `package.Service/Method`, with `rpc.system`, `rpc.service`, `rpc.method` and `rpc.grpc.status_code`;
/// never message contents, metadata values or peer addresses (no personal data in telemetry). Only made while
/// `TraceSwitch.isOn`.
enum CallTracing {
    /// A server span for a call to `path`: with `.continued`, in the trace of the request's headers when they carry
    /// one; with `.linked`, a root linked to the span they name.
    static func startServerSpan(path: String, requestHeaders: [HTTP2Header], callerTrace: CallerTrace) -> any Span {
        var caller = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(requestHeaders, into: &caller, using: HeaderExtractor())
        let span: any Span
        switch callerTrace {
        case .continued:
            span = startSpan(Self.spanName(path), context: caller, ofKind: .server)
        case .linked:
            span = startSpan(Self.spanName(path), context: .topLevel, ofKind: .server)
            if requestHeaders.contains(where: { $0.name == TraceHeaders.traceparent }) {
                span.addLink(SpanLink(context: caller, attributes: [:]))
            }
        }
        Self.describe(span, path: path)
        return span
    }

    /// A client span for a call to `path` under the current task's context; its context is added to `metadata`.
    static func startClientSpan(path: String, metadata: inout Metadata) -> any Span {
        let span = startSpan(Self.spanName(path), context: TraceSwitch.currentContext, ofKind: .client)
        Self.describe(span, path: path)
        InstrumentationSystem.instrument.inject(span.context, into: &metadata, using: MetadataInjector())
        return span
    }

    /// Records the call's status on `span` and ends it.
    static func end(_ span: any Span, code: StatusCode) {
        span.attributes["rpc.grpc.status_code"] = code.rawValue
        if code != .ok {
            span.setStatus(SpanStatus(code: .error, message: "\(code)"))
        }
        span.end()
    }

    /// `/package.Service/Method` without its leading slash, as the conventions name RPC spans.
    private static func spanName(_ path: String) -> String {
        path.first == "/" ? String(path.dropFirst()) : path
    }

    private static func describe(_ span: any Span, path: String) {
        span.attributes["rpc.system"] = "grpc"
        let parts = path.split(separator: "/")
        if parts.count == 2 {
            span.attributes["rpc.service"] = String(parts[0])
            span.attributes["rpc.method"] = String(parts[1])
        }
    }
}

/// Reads `traceparent`/`tracestate` from a request's header fields.
private struct HeaderExtractor: Extractor {
    func extract(key: String, from carrier: [HTTP2Header]) -> String? {
        carrier.first { $0.name == key }?.value
    }
}

/// Adds `traceparent`/`tracestate` to an outgoing call's metadata, replacing what the caller put there.
private struct MetadataInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout Metadata) {
        carrier.replace(key, with: value)
    }
}
