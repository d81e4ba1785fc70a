import KindredProto
import KindredTracing
import Tracing

/// Events carry the trace of the work that produced them (W3C `traceparent`/`tracestate` in the envelope), and a
/// consumer handles each event in a span of that trace: one Swipe's trace shows the consumers' work too, even
/// though the relay delivers it later, in calls of its own.
enum EventTracing {
    /// Stamps `event` with `context`'s trace, unless it already carries one or tracing is off.
    static func stamp(_ event: inout Kindred.Common.V1.Event, with context: ServiceContext? = nil) {
        guard TraceSwitch.isOn, event.traceparent.isEmpty else { return }
        let headers = TraceSwitch.headers(of: context ?? TraceSwitch.currentContext)
        event.traceparent = headers[TraceHeaders.traceparent] ?? ""
        event.tracestate = headers[TraceHeaders.tracestate] ?? ""
    }

    /// Runs `body` in a consumer span `event <type>` that continues the event's trace (a root when it carries
    /// none), linked to the delivery call it arrived in. Without tracing, just `body`.
    static func handling<T>(
        _ event: Kindred.Common.V1.Event,
        _ body: () async throws -> T
    ) async throws -> T {
        guard TraceSwitch.isOn else { return try await body() }
        let delivery = TraceSwitch.currentContext
        var headers: [String: String] = [:]
        if !event.traceparent.isEmpty { headers[TraceHeaders.traceparent] = event.traceparent }
        if !event.tracestate.isEmpty { headers[TraceHeaders.tracestate] = event.tracestate }
        let parent = TraceSwitch.context(continuing: headers)
        let span = startSpan("event \(event.payload?.typeName ?? "unknown")", context: parent, ofKind: .consumer)
        span.attributes["messaging.system"] = "kindred.events"
        span.attributes["messaging.operation.type"] = "process"
        span.attributes["messaging.message.id"] = event.eventId
        span.attributes["kindred.event.producer"] = event.producer
        span.addLink(SpanLink(context: delivery, attributes: [:]))
        do {
            let result = try await ServiceContext.withValue(span.context) { try await body() }
            span.end()
            return result
        } catch {
            span.setStatus(SpanStatus(code: .error))
            span.end()
            throw error
        }
    }
}
