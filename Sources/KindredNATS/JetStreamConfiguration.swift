/// A stream's settings (`$JS.API.STREAM.CREATE`), the fields Kindred sets. Durations are nanoseconds on the wire.
public struct JetStreamStreamConfiguration: Codable, Sendable, Hashable {
    public var name: String
    public var subjects: [String]
    /// "limits": messages stay until `maxAge` (or the stream's size limits), whoever has read them.
    public var retention = "limits"
    /// "file" or "memory".
    public var storage = "file"
    public var replicas = 1
    /// The de-duplication window of `Nats-Msg-Id`, nanoseconds.
    public var duplicateWindow: Int64 = 120_000_000_000
    /// How long messages are kept, nanoseconds (0: for ever).
    public var maxAge: Int64 = 0
    public var discard = "old"

    public init(name: String, subjects: [String]) {
        self.name = name
        self.subjects = subjects
    }

    enum CodingKeys: String, CodingKey {
        case name, subjects, retention, storage, discard
        case replicas = "num_replicas"
        case duplicateWindow = "duplicate_window"
        case maxAge = "max_age"
    }
}

/// A durable pull consumer's settings (`$JS.API.CONSUMER.DURABLE.CREATE`).
public struct JetStreamConsumerConfiguration: Codable, Sendable, Hashable {
    public var durableName: String
    /// Only messages on this subject (wildcards allowed); nil for the whole stream.
    public var filterSubject: String?
    /// "all": a new consumer starts at the stream's first message.
    public var deliverPolicy = "all"
    public var ackPolicy = "explicit"
    /// How long a delivered message waits for its ack before it is delivered again, nanoseconds.
    public var ackWait: Int64 = 30_000_000_000
    /// -1: redelivered until acknowledged.
    public var maxDeliver = -1
    /// Messages delivered and not yet acknowledged; 1 keeps the subject's order across every client that pulls.
    public var maxAckPending = 1
    public var replayPolicy = "instant"

    public init(durableName: String, filterSubject: String?) {
        self.durableName = durableName
        self.filterSubject = filterSubject
    }

    enum CodingKeys: String, CodingKey {
        case durableName = "durable_name"
        case filterSubject = "filter_subject"
        case deliverPolicy = "deliver_policy"
        case ackPolicy = "ack_policy"
        case ackWait = "ack_wait"
        case maxDeliver = "max_deliver"
        case maxAckPending = "max_ack_pending"
        case replayPolicy = "replay_policy"
    }
}

/// The answer to a publish on a stream's subject.
public struct JetStreamPublishAck: Decodable, Sendable, Hashable {
    public var stream: String
    public var sequence: UInt64
    /// True when the message id was already in the de-duplication window: nothing was stored again.
    public var duplicate: Bool

    enum CodingKeys: String, CodingKey {
        case stream
        case sequence = "seq"
        case duplicate
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.stream = try container.decode(String.self, forKey: .stream)
        self.sequence = try container.decode(UInt64.self, forKey: .sequence)
        self.duplicate = try container.decodeIfPresent(Bool.self, forKey: .duplicate) ?? false
    }
}

/// The parts of `$JS.API.CONSUMER.INFO` Kindred reads.
public struct JetStreamConsumerInfo: Decodable, Sendable, Hashable {
    public struct SequenceInfo: Decodable, Sendable, Hashable {
        public var consumerSequence: UInt64
        public var streamSequence: UInt64
        enum CodingKeys: String, CodingKey {
            case consumerSequence = "consumer_seq"
            case streamSequence = "stream_seq"
        }
    }

    public var name: String
    public var delivered: SequenceInfo
    /// The last message acknowledged with everything before it.
    public var ackFloor: SequenceInfo
    /// Delivered, not yet acknowledged.
    public var ackPending: Int
    /// Not yet delivered.
    public var pending: UInt64
    public var redelivered: Int

    enum CodingKeys: String, CodingKey {
        case name, delivered
        case ackFloor = "ack_floor"
        case ackPending = "num_ack_pending"
        case pending = "num_pending"
        case redelivered = "num_redelivered"
    }
}

/// The parts of `$JS.API.STREAM.INFO` Kindred reads.
public struct JetStreamStreamInfo: Decodable, Sendable, Hashable {
    public struct State: Decodable, Sendable, Hashable {
        public var messages: UInt64
        public var firstSequence: UInt64
        public var lastSequence: UInt64
        enum CodingKeys: String, CodingKey {
            case messages
            case firstSequence = "first_seq"
            case lastSequence = "last_seq"
        }
    }

    public var config: JetStreamStreamConfiguration
    public var state: State
    /// When the stream was created, as the server writes it (RFC 3339 to the nanosecond). It stays the same across
    /// leader changes and restarts of the servers, and differs for a stream deleted and created again under the
    /// same name: it tells one stream from another.
    public var created: String
}

/// An error answer of the JetStream API (`{"error": {"code": 404, "err_code": 10059, "description": …}}`).
public struct JetStreamAPIError: Error, Decodable, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    /// JetStream's own code: 10058 stream name in use with another configuration, 10059 stream not found, 10014
    /// consumer not found, 10037 no message found.
    public var errorCode: Int
    public var text: String

    enum CodingKeys: String, CodingKey {
        case code
        case errorCode = "err_code"
        case text = "description"
    }

    public init(code: Int, errorCode: Int, text: String) {
        self.code = code
        self.errorCode = errorCode
        self.text = text
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.code = try container.decodeIfPresent(Int.self, forKey: .code) ?? 0
        self.errorCode = try container.decodeIfPresent(Int.self, forKey: .errorCode) ?? 0
        self.text = try container.decodeIfPresent(String.self, forKey: .text) ?? ""
    }

    public var description: String { "JetStream error \(self.code)/\(self.errorCode): \(self.text)" }

    public static let streamNameInUse = 10058
    public static let streamNotFound = 10059
    public static let consumerNotFound = 10014
    public static let noMessageFound = 10037
}
