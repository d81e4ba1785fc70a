import Synchronization
import Tracing

/// Whether this process makes spans. Off until a server's bootstrap installs a real tracer (OTLP export, see
/// `KindredOTel`); while off, the runtime and the database client skip tracing entirely: no tracer lookup (a
/// lock and a cast in swift-distributed-tracing), no span, no header parsing — one relaxed load per call.
public enum TraceSwitch {
    private static let on = Atomic<Bool>(false)

    /// True once `turnOn()` ran.
    public static var isOn: Bool { self.on.load(ordering: .relaxed) }

    /// Called once `InstrumentationSystem` holds the tracer spans should go to.
    public static func turnOn() {
        self.on.store(true, ordering: .releasing)
    }

    /// The current task's context if it has one, else a new trace's (a span started from it is a root).
    public static var currentContext: ServiceContext { ServiceContext.current ?? .topLevel }

    /// `traceparent` and `tracestate` (W3C Trace Context) of `context`, as the installed propagator writes them;
    /// empty when tracing is off or the context has no span.
    public static func headers(of context: ServiceContext) -> [String: String] {
        guard self.isOn else { return [:] }
        var headers: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &headers, using: DictionaryInjector())
        return headers
    }

    /// The context `headers` (`traceparent`, `tracestate`) continue, on top of `base`.
    public static func context(continuing headers: [String: String], base: ServiceContext = .topLevel) -> ServiceContext {
        var context = base
        InstrumentationSystem.instrument.extract(headers, into: &context, using: DictionaryExtractor())
        return context
    }
}

/// W3C Trace Context header names, as they travel in gRPC metadata and in event envelopes.
public enum TraceHeaders {
    public static let traceparent = "traceparent"
    public static let tracestate = "tracestate"
}

private struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}

private struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? {
        carrier[key]
    }
}
