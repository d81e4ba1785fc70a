import KindredProtobuf

/// How a status travels in the Connect protocol (connectrpc.com/docs/protocol): its code name, the HTTP status
/// of a unary error, and the error JSON (`{"code":"not_found","message":"…","details":[…]}`) that unary error
/// bodies and the end-of-stream message carry. Public for HTTP answers outside calls (the gateway's upload PUT).
public enum ConnectError {
    /// Connect's name of a gRPC code (snake case; CANCELLED is `canceled`).
    public static func codeName(_ code: StatusCode) -> String {
        Self.names[code.rawValue]
    }

    private static let names = [
        "ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
        "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range",
        "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated",
    ]

    /// The HTTP status of a unary error response with this code (the Connect protocol's table).
    public static func httpStatus(_ code: StatusCode) -> Int {
        switch code {
        case .cancelled: 499
        case .invalidArgument, .failedPrecondition, .outOfRange: 400
        case .deadlineExceeded: 504
        case .notFound: 404
        case .alreadyExists, .aborted: 409
        case .permissionDenied: 403
        case .resourceExhausted: 429
        case .unimplemented: 501
        case .unavailable: 503
        case .unauthenticated: 401
        default: 500  // unknown, internal, data loss
        }
    }

    /// One entry of an error's `details`: a message type's full name and its serialized bytes, with the message
    /// as JSON in `debug` when the server can render it (clients ignore `debug`; people reading curl output
    /// do not).
    public struct Detail: Equatable, Sendable {
        public var type: String
        public var value: [UInt8]
        public var debugJSON: [UInt8]?

        public init(type: String, value: [UInt8], debugJSON: [UInt8]?) {
            self.type = type
            self.value = value
            self.debugJSON = debugJSON
        }
    }

    /// The error object: `code`, `message` (omitted when empty) and `details` (omitted when there are none).
    public static func json(_ error: RPCError, details: [Detail]) -> [UInt8] {
        var out = JSONWriter()
        out.append("{\"code\":")
        out.string(Self.codeName(error.code))
        if !error.message.isEmpty {
            out.append(",\"message\":")
            out.string(error.message)
        }
        if !details.isEmpty {
            out.append(",\"details\":[")
            for (index, detail) in details.enumerated() {
                if index > 0 { out.append(",") }
                out.append("{\"type\":")
                out.string(detail.type)
                out.append(",\"value\":")
                out.string(Base64.encode(detail.value, padding: false))
                if let debug = detail.debugJSON {
                    out.append(",\"debug\":")
                    out.bytes.append(contentsOf: debug)
                }
                out.append("}")
            }
            out.append("]")
        }
        out.append("}")
        return out.bytes
    }

    /// The end-of-stream message of a streaming call: `{"error":{…},"metadata":{…}}`, each part only when
    /// present (a call that ended well with no trailers sends `{}`). Metadata values are lists of strings,
    /// `-bin` values base64 without padding.
    static func endOfStreamJSON(_ error: RPCError?, details: [Detail], trailers: Metadata) -> [UInt8] {
        var out = JSONWriter()
        out.append("{")
        if let error {
            out.append("\"error\":")
            out.bytes.append(contentsOf: Self.json(error, details: details))
        }
        var headers: [HTTP2HeaderPair] = []
        for entry in trailers where !Metadata.isReserved(entry.key) && Metadata.isValidKey(entry.key) {
            switch entry.value {
            case .string(let value) where !entry.key.hasSuffix("-bin") && Metadata.isValidASCIIValue(value):
                headers.append((entry.key, value))
            case .binary(let value) where entry.key.hasSuffix("-bin"):
                headers.append((entry.key, Base64.encode(value, padding: false)))
            default:
                continue
            }
        }
        if !headers.isEmpty {
            if error != nil { out.append(",") }
            out.append("\"metadata\":{")
            // Keys in order of first appearance, each with all its values.
            var seen: [String] = []
            for (key, _) in headers where !seen.contains(key) { seen.append(key) }
            for (index, key) in seen.enumerated() {
                if index > 0 { out.append(",") }
                out.string(key)
                out.append(":[")
                var first = true
                for (name, value) in headers where name == key {
                    if !first { out.append(",") }
                    first = false
                    out.string(value)
                }
                out.append("]")
            }
            out.append("}")
        }
        out.append("}")
        return out.bytes
    }

    /// Parses `connect-timeout-ms`: a positive integer of at most 10 digits (the protocol's limit); nil when
    /// malformed.
    static func parseTimeout(_ value: String) -> Duration? {
        let utf8 = value.utf8
        guard (1...10).contains(utf8.count) else { return nil }
        var milliseconds: Int64 = 0
        for byte in utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            milliseconds = milliseconds * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return .milliseconds(milliseconds)
    }
}

private typealias HTTP2HeaderPair = (name: String, value: String)

/// Just enough JSON output for the protocol's own objects: ASCII punctuation and escaped strings.
struct JSONWriter {
    var bytes: [UInt8] = []

    mutating func append(_ literal: StaticString) {
        literal.withUTF8Buffer { self.bytes.append(contentsOf: $0) }
    }

    /// A JSON string: quotes, backslashes and control characters escaped (RFC 8259 §7); other UTF-8 as is.
    mutating func string(_ value: String) {
        let hex = Array("0123456789abcdef".utf8)
        self.bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): self.append("\\\"")
            case UInt8(ascii: "\\"): self.append("\\\\")
            case UInt8(ascii: "\n"): self.append("\\n")
            case UInt8(ascii: "\r"): self.append("\\r")
            case UInt8(ascii: "\t"): self.append("\\t")
            case 0..<0x20:
                self.append("\\u00")
                self.bytes.append(hex[Int(byte >> 4)])
                self.bytes.append(hex[Int(byte & 0xF)])
            default:
                self.bytes.append(byte)
            }
        }
        self.bytes.append(UInt8(ascii: "\""))
    }
}
