import KindredHTTP2

/// A plain HTTP/2 request for `HTTP2Client`: the method, path, extra headers and a body sent whole.
public struct HTTP2Request: Sendable {
    public var method: String
    /// The path and query, e.g. "/3/device/<token>".
    public var path: String
    /// Headers besides the pseudo-headers and `content-length`, which the client adds. Names in lower case.
    public var headers: [HTTP2Header]
    public var body: [UInt8]

    public init(method: String = "POST", path: String, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }
}

/// The answer to an `HTTP2Request`.
public struct HTTP2Response: Sendable {
    /// The HTTP status (the `:status` pseudo-header).
    public var status: Int
    /// The response headers (and trailers, if any), pseudo-headers left out.
    public var headers: [HTTP2Header]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTP2Header], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name` (lower case).
    public func header(_ name: String) -> String? {
        self.headers.first { $0.name == name }?.value
    }
}
