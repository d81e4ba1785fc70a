import Foundation

/// The JetStream calls Kindred makes, over a ``NATSClient``: streams and durable pull consumers created or
/// updated to a configuration, publishing with a message id (de-duplicated within the stream's window) that
/// waits for the stream's acknowledgement, pulling a batch, and acknowledging (`+ACK`, `-NAK`, `+WPI`).
///
/// API answers that carry an `error` throw ``JetStreamAPIError``; transport failures throw ``NATSProtocolError``.
public struct JetStream: Sendable {
    public let client: NATSClient
    /// The deadline of one API call or publish.
    public var timeout: Duration

    public init(client: NATSClient, timeout: Duration = .seconds(5)) {
        self.client = client
        self.timeout = timeout
    }

    // MARK: Streams and consumers

    /// Creates the stream, or updates it when it exists with other settings; returns its state.
    @discardableResult
    public func createOrUpdateStream(_ configuration: JetStreamStreamConfiguration) async throws -> JetStreamStreamInfo {
        try Self.validate(name: configuration.name)
        let body = try JSONEncoder().encode(configuration)
        do {
            return try await self.call("$JS.API.STREAM.CREATE.\(configuration.name)", body: Array(body))
        } catch let error as JetStreamAPIError where error.errorCode == JetStreamAPIError.streamNameInUse {
            return try await self.call("$JS.API.STREAM.UPDATE.\(configuration.name)", body: Array(body))
        }
    }

    public func streamInfo(_ stream: String) async throws -> JetStreamStreamInfo {
        try Self.validate(name: stream)
        return try await self.call("$JS.API.STREAM.INFO.\(stream)", body: [])
    }

    public func deleteStream(_ stream: String) async throws {
        try Self.validate(name: stream)
        let _: Acknowledgement = try await self.call("$JS.API.STREAM.DELETE.\(stream)", body: [])
    }

    /// Creates the durable consumer, or updates the settings an existing one may change.
    @discardableResult
    public func createOrUpdateConsumer(
        stream: String, _ configuration: JetStreamConsumerConfiguration
    ) async throws -> JetStreamConsumerInfo {
        try Self.validate(name: stream)
        try Self.validate(name: configuration.durableName)
        struct Request: Encodable {
            var streamName: String
            var config: JetStreamConsumerConfiguration
            enum CodingKeys: String, CodingKey {
                case streamName = "stream_name"
                case config
            }
        }
        let body = try JSONEncoder().encode(Request(streamName: stream, config: configuration))
        return try await self.call(
            "$JS.API.CONSUMER.DURABLE.CREATE.\(stream).\(configuration.durableName)", body: Array(body))
    }

    public func consumerInfo(stream: String, consumer: String) async throws -> JetStreamConsumerInfo {
        try Self.validate(name: stream)
        try Self.validate(name: consumer)
        return try await self.call("$JS.API.CONSUMER.INFO.\(stream).\(consumer)", body: [])
    }

    /// The stream sequence of the first message at or after `sequence` whose subject matches `subject` (wildcards
    /// allowed), nil when there is none (`$JS.API.STREAM.MSG.GET` with `next_by_subj`).
    public func firstSequence(stream: String, from sequence: UInt64, subject: String) async throws -> UInt64? {
        try Self.validate(name: stream)
        struct Request: Encodable {
            var seq: UInt64
            var nextBySubject: String
            enum CodingKeys: String, CodingKey {
                case seq
                case nextBySubject = "next_by_subj"
            }
        }
        struct Answer: Decodable {
            struct Message: Decodable { var seq: UInt64 }
            var message: Message
        }
        let body = try JSONEncoder().encode(Request(seq: sequence, nextBySubject: subject))
        do {
            let answer: Answer = try await self.call("$JS.API.STREAM.MSG.GET.\(stream)", body: Array(body))
            return answer.message.seq
        } catch let error as JetStreamAPIError where error.errorCode == JetStreamAPIError.noMessageFound {
            return nil
        }
    }

    // MARK: Messages

    /// Publishes to a stream's subject with `Nats-Msg-Id: messageID` and returns the stream's acknowledgement
    /// (`duplicate` when the id was stored before within the window). Throws when no stream takes the subject
    /// (``NATSProtocolError/Kind/server``) or no acknowledgement comes within ``timeout``.
    public func publish(_ subject: String, payload: [UInt8], messageID: String) async throws -> JetStreamPublishAck {
        var headers = NATSHeaders()
        headers.add("Nats-Msg-Id", messageID)
        let answer = try await self.client.request(subject, payload: payload, headers: headers, timeout: self.timeout)
        return try Self.decode(answer.payload)
    }

    /// Pulls up to `batch` messages from a durable consumer, waiting up to `expires` for the first ones. Returns
    /// fewer (or none) when the pull expires first.
    public func fetch(
        stream: String, consumer: String, batch: Int, expires: Duration
    ) async throws -> [JetStreamMessage] {
        try Self.validate(name: stream)
        try Self.validate(name: consumer)
        precondition((1...256).contains(batch), "a pull takes 1...256 messages")
        let expiresNanoseconds = expires.components.seconds * 1_000_000_000 + expires.components.attoseconds / 1_000_000_000
        let body = Array(#"{"batch":\#(batch),"expires":\#(expiresNanoseconds)}"#.utf8)
        let messages = try await self.client.collect(
            "$JS.API.CONSUMER.MSG.NEXT.\(stream).\(consumer)", payload: body, count: batch,
            timeout: expires + .seconds(2), ownSubscription: true)
        return messages.compactMap(JetStreamMessage.init)
    }

    /// Acknowledges `message` and waits until the server has recorded it (so it is not delivered again).
    public func ack(_ message: JetStreamMessage) async throws {
        _ = try await self.client.request(
            message.message.replyTo!, payload: Array("+ACK".utf8), timeout: self.timeout)
    }

    /// Asks for `message` again, after `delay` if given (it is delivered again before the messages after it).
    public func nak(_ message: JetStreamMessage, delay: Duration? = nil) async throws {
        var text = "-NAK"
        if let delay {
            let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
            text += #" {"delay":\#(nanoseconds)}"#
        }
        try await self.client.publish(message.message.replyTo!, payload: Array(text.utf8))
    }

    /// Says `message` is still being worked on: its ack wait starts again.
    public func inProgress(_ message: JetStreamMessage) async throws {
        try await self.client.publish(message.message.replyTo!, payload: Array("+WPI".utf8))
    }

    // MARK: The API

    private struct Acknowledgement: Decodable {}

    private struct APIFailure: Decodable { var error: JetStreamAPIError? }

    private func call<Answer: Decodable>(_ subject: String, body: [UInt8]) async throws -> Answer {
        let answer = try await self.client.request(subject, payload: body, timeout: self.timeout)
        return try Self.decode(answer.payload)
    }

    /// Decodes an API answer: its `error` throws, anything that is not the expected JSON throws
    /// ``NATSProtocolError/Kind/malformed``.
    static func decode<Answer: Decodable>(_ payload: [UInt8]) throws -> Answer {
        let data = Data(payload)
        if let failure = try? JSONDecoder().decode(APIFailure.self, from: data), let error = failure.error { throw error }
        do {
            return try JSONDecoder().decode(Answer.self, from: data)
        } catch {
            throw NATSProtocolError(.malformed, "a JetStream answer is not the expected JSON: \(error)")
        }
    }

    /// Stream and consumer names: 1...64 of letters, digits, `-` and `_`.
    static func validate(name: String) throws(NATSProtocolError) {
        guard (1...64).contains(name.utf8.count),
            name.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 || $0 == 95 })
        else {
            throw NATSProtocolError(.malformed, "a stream or consumer name must be 1...64 letters, digits, - or _")
        }
    }
}
