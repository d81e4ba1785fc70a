/// Limits and settings of one HTTP/2 connection, applied to its nghttp2 session.
///
/// The defaults follow DESIGN.md §6: 100 concurrent streams, nghttp2's reset-flood, CONTINUATION and
/// SETTINGS limits switched on, and a bounded header list.
public struct HTTP2Configuration: Sendable, Hashable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS we advertise; nghttp2 refuses streams beyond it. Default 100.
    public var maxConcurrentStreams: UInt32 = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE we advertise per stream, in bytes. Default 1 MiB.
    public var initialStreamWindowSize: UInt32 = 1 << 20
    /// The connection-level receive window, in bytes. Default 16 MiB.
    public var connectionWindowSize: Int32 = 1 << 24
    /// SETTINGS_MAX_FRAME_SIZE we advertise, in bytes (16 KiB..16 MiB). Default 16 KiB.
    public var maxFrameSize: UInt32 = 1 << 14
    /// SETTINGS_MAX_HEADER_LIST_SIZE we advertise and enforce on received header blocks, in bytes
    /// (name + value + 32 per field, as RFC 9113 counts). Default 16 KiB.
    public var maxHeaderListSize: UInt32 = 1 << 14
    /// nghttp2's RST_STREAM rate limit (Rapid Reset, CVE-2023-44487): token bucket burst and refill per second.
    /// A backstop: the server's abuse budget (`HTTP2AbuseBudget`, 1000 and 33/s) charges resets too and
    /// closes such a connection first, recording it for the address penalty.
    public var streamResetBurst: UInt64 = 2000
    public var streamResetRatePerSecond: UInt64 = 66
    /// Most CONTINUATION frames accepted after one HEADERS frame (CVE-2024-27316 class). Default 8.
    public var maxContinuations: Int = 8
    /// Most entries accepted in one SETTINGS frame. Default 32.
    public var maxSettingsEntries: Int = 32
    /// Most unacknowledged outbound ACK frames (PING/SETTINGS acks) queued before the session fails. Default 1000.
    public var maxOutboundAcks: Int = 1000

    public init() {}
}

/// HTTP/2 error codes (RFC 9113 §7) used by Kindred.
public struct HTTP2ErrorCode: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }

    public static let noError = HTTP2ErrorCode(0x0)
    public static let protocolError = HTTP2ErrorCode(0x1)
    public static let internalError = HTTP2ErrorCode(0x2)
    public static let flowControlError = HTTP2ErrorCode(0x3)
    public static let refusedStream = HTTP2ErrorCode(0x7)
    public static let cancel = HTTP2ErrorCode(0x8)
    public static let enhanceYourCalm = HTTP2ErrorCode(0xb)

    public var description: String {
        switch self.rawValue {
        case 0x0: "NO_ERROR"
        case 0x1: "PROTOCOL_ERROR"
        case 0x2: "INTERNAL_ERROR"
        case 0x3: "FLOW_CONTROL_ERROR"
        case 0x4: "SETTINGS_TIMEOUT"
        case 0x5: "STREAM_CLOSED"
        case 0x6: "FRAME_SIZE_ERROR"
        case 0x7: "REFUSED_STREAM"
        case 0x8: "CANCEL"
        case 0x9: "COMPRESSION_ERROR"
        case 0xa: "CONNECT_ERROR"
        case 0xb: "ENHANCE_YOUR_CALM"
        case 0xc: "INADEQUATE_SECURITY"
        case 0xd: "HTTP_1_1_REQUIRED"
        default: "0x\(String(self.rawValue, radix: 16))"
        }
    }
}

/// One header field as received or to be sent. Names are lower-case (HTTP/2 requires it).
public struct HTTP2Header: Hashable, Sendable {
    public var name: String
    public var value: String
    /// Whether HPACK may add the field to the connection's dynamic table when it is sent (RFC 7541 §6.2). A value
    /// that changes with every message (a deadline, a request id) is sent without: indexed, each one would be
    /// inserted by both ends and evict fields that do repeat, for nothing.
    public var indexed: Bool
    public init(_ name: String, _ value: String, indexed: Bool = true) {
        self.name = name
        self.value = value
        self.indexed = indexed
    }

    /// Equal fields have equal names and values, however they are sent.
    public static func == (lhs: HTTP2Header, rhs: HTTP2Header) -> Bool { lhs.name == rhs.name && lhs.value == rhs.value }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.name)
        hasher.combine(self.value)
    }
}

/// A failure reported by nghttp2, carrying its error code and nghttp2's own (constant) description.
public struct HTTP2SessionError: Error, CustomStringConvertible {
    public let code: Int32
    public let operation: String
    public let message: String
    public var description: String { "nghttp2 \(self.operation) failed: \(self.message) (\(self.code))" }
    /// nghttp2 closed the session for a flood it detects itself (NGHTTP2_ERR_FLOODED: queued ACKs over
    /// `maxOutboundAcks`, too many SETTINGS entries) or NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.
    public var isFlood: Bool { self.code == -904 || self.code == -905 }
}
