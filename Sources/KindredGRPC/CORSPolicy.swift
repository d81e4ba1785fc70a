import KindredHTTP2

/// Cross-origin access for browser clients (the Fetch standard's CORS protocol): which origins may call, what a
/// preflight answers, and the headers added to their responses. Bearer tokens only: credentials (cookies) are
/// never allowed, so no `Access-Control-Allow-Credentials`. A value type with no I/O.
public struct CORSPolicy: Sendable, Hashable {
    /// Origins allowed to call, exactly as browsers send them (`https://app.example.com`, scheme, host and port
    /// when not the default). Empty: no cross-origin call is allowed.
    public var allowedOrigins: Set<String>
    /// How long a browser may cache a preflight's answer (`Access-Control-Max-Age`). Default 2 hours (Chromium's
    /// cap).
    public var maxAge: Duration

    public init(allowedOrigins: Set<String>, maxAge: Duration = .seconds(7200)) {
        self.allowedOrigins = allowedOrigins
        self.maxAge = maxAge
    }

    /// Request headers Connect and gRPC-Web clients send beyond the CORS-safelisted ones.
    public static let allowedRequestHeaders =
        "authorization, content-type, connect-protocol-version, connect-timeout-ms, connect-content-encoding, "
        + "connect-accept-encoding, content-encoding, grpc-timeout, grpc-encoding, grpc-accept-encoding, "
        + "x-grpc-web, x-user-agent, x-request-id"

    /// Response headers the clients read, which browsers hide unless exposed: gRPC-Web's status when it comes as
    /// headers (trailers-only), Connect's encodings, the request id and Kindred's error detail.
    public static let exposedResponseHeaders =
        "grpc-status, grpc-message, grpc-status-details-bin, grpc-encoding, grpc-accept-encoding, "
        + "connect-content-encoding, connect-accept-encoding, content-encoding, x-request-id, kindred-error-bin"

    /// Whether a request from `origin` (its `Origin` header, nil when none: not a cross-origin browser request)
    /// may be answered with CORS headers.
    public func allows(origin: String) -> Bool {
        self.allowedOrigins.contains(origin)
    }

    /// The answer to a preflight (OPTIONS with `Origin` and `Access-Control-Request-Method`) of an RPC: 204 with
    /// the CORS headers for an allowed origin and method (POST, or Connect's GET), else 403 without them.
    func preflight(origin: String?, requestMethod: String?) -> [HTTP2Header] {
        guard let allowed = self.allowedPreflight(origin: origin, requestMethod: requestMethod) else {
            return [HTTP2Header(":status", "403"), HTTP2Header("vary", "origin")]
        }
        return [HTTP2Header(":status", "204")] + allowed
    }

    /// The headers that allow a preflight from an allowed origin asking for one of `methods`, or nil to refuse it.
    /// The defaults are the RPC protocols' methods and headers; the media port's upload URLs allow PUT with
    /// `content-type`.
    public func allowedPreflight(
        origin: String?,
        requestMethod: String?,
        methods: [String] = ["POST", "GET"],
        requestHeaders: String = Self.allowedRequestHeaders
    ) -> [HTTP2Header]? {
        guard let origin, self.allows(origin: origin), let requestMethod, methods.contains(requestMethod) else {
            return nil
        }
        return [
            HTTP2Header("access-control-allow-origin", origin),
            HTTP2Header("access-control-allow-methods", methods.joined(separator: ", ")),
            HTTP2Header("access-control-allow-headers", requestHeaders),
            HTTP2Header("access-control-max-age", String(self.maxAge.components.seconds)),
            HTTP2Header("vary", "origin"),
        ]
    }

    /// Headers added to an actual response: for an allowed origin, the origin and the headers it may read
    /// (`exposing`, nil for none beyond the safelisted ones); always `vary: origin` when the server has a policy,
    /// since the answer depends on it.
    public func responseHeaders(origin: String?, exposing: String? = Self.exposedResponseHeaders) -> [HTTP2Header] {
        guard let origin, self.allows(origin: origin) else { return [HTTP2Header("vary", "origin")] }
        var headers = [HTTP2Header("access-control-allow-origin", origin)]
        if let exposing { headers.append(HTTP2Header("access-control-expose-headers", exposing)) }
        headers.append(HTTP2Header("vary", "origin"))
        return headers
    }
}
