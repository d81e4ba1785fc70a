import KindredProtobuf
import NIOCore

/// The gRPC length-prefixed message framing: 1 byte compressed flag, 4 bytes big-endian length, message.
enum MessageFraming {
    static let headerSize = 5

    /// Serializes a message straight into a new framed buffer (protobuf-c packs into temporary memory, which is
    /// copied once, behind the 5-byte prefix).
    static func frame<Message: ProtoMessage>(
        _ message: Message,
        allocator: ByteBufferAllocator,
        onFailure: () -> RPCError
    ) throws(RPCError) -> ByteBuffer {
        do {
            return try message.withUnsafeSerializedBytes { bytes in
                var buffer = allocator.buffer(capacity: headerSize + bytes.count)
                buffer.writeInteger(UInt8(0))
                buffer.writeInteger(UInt32(bytes.count))
                buffer.writeBytes(bytes)
                return buffer
            }
        } catch {
            throw onFailure()
        }
    }

    /// Serializes a message as the call's protocol carries it: framed protobuf (gRPC, gRPC-Web, Connect
    /// streaming), a bare message (Connect unary), or JSON through `json`, framed for Connect streaming.
    static func encode<Message: ProtoMessage>(
        _ message: Message,
        wire: WireProtocol,
        json: ProtoJSONCodec?,
        allocator: ByteBufferAllocator,
        onFailure: () -> RPCError
    ) throws(RPCError) -> ByteBuffer {
        switch wire {
        case .grpc, .grpcWeb, .connectStreaming(.proto):
            return try Self.frame(message, allocator: allocator, onFailure: onFailure)
        case .connectUnary(.proto):
            do {
                return try message.withUnsafeSerializedBytes { bytes in
                    var buffer = allocator.buffer(capacity: bytes.count)
                    buffer.writeBytes(bytes)
                    return buffer
                }
            } catch {
                throw onFailure()
            }
        case .connectUnary(.json), .connectStreaming(.json):
            guard let json else { throw onFailure() }
            let bytes: [UInt8]
            do {
                bytes = try json.toJSON(try message.serializedBytes(), Message.self)
            } catch {
                throw onFailure()
            }
            if wire.isFramed { return WireResponse.frame(flag: 0, bytes, allocator: allocator) }
            var buffer = allocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            return buffer
        }
    }
}

/// Splits received DATA bytes into messages. A value type with no I/O, so it is tested on its own.
struct MessageDeframer {
    enum Failure: Error, Equatable {
        /// The length prefix announced a message larger than the receive limit.
        case messageTooLarge(length: Int, limit: Int)
        /// The compressed flag was set but the call negotiated no compression.
        case compressedWithoutEncoding
        /// The flag byte is neither 0 nor 1.
        case invalidFlag(UInt8)
    }

    let maxMessageSize: Int
    /// False for a body that is one bare message (Connect unary): it is complete only at the end of the body.
    let framed: Bool
    private var buffer: ByteBuffer?
    /// Bytes appended so far that belong to a message not yet complete.
    var bufferedBytes: Int { self.buffer?.readableBytes ?? 0 }

    init(maxMessageSize: Int, framed: Bool = true) {
        self.maxMessageSize = maxMessageSize
        self.framed = framed
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer, allocator: ByteBufferAllocator) {
        if self.buffer == nil {
            self.buffer = allocator.buffer(capacity: max(bytes.count, 64))
        }
        self.buffer!.writeBytes(bytes)
    }

    /// The next complete message, nil when more bytes are needed.
    mutating func next() throws(Failure) -> ByteBuffer? {
        guard self.framed else {
            let length = self.bufferedBytes
            if length > self.maxMessageSize { throw .messageTooLarge(length: length, limit: self.maxMessageSize) }
            return nil
        }
        guard var buffer = self.buffer, buffer.readableBytes >= MessageFraming.headerSize else { return nil }
        let flag = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self)!
        let length = Int(buffer.getInteger(at: buffer.readerIndex + 1, as: UInt32.self)!)
        switch flag {
        case 0: break
        case 1: throw .compressedWithoutEncoding
        default: throw .invalidFlag(flag)
        }
        if length > self.maxMessageSize { throw .messageTooLarge(length: length, limit: self.maxMessageSize) }
        guard buffer.readableBytes >= MessageFraming.headerSize + length else { return nil }
        buffer.moveReaderIndex(forwardBy: MessageFraming.headerSize)
        let message = buffer.readSlice(length: length)!
        if buffer.readableBytes == 0 {
            self.buffer = nil
        } else {
            self.buffer = buffer
        }
        return message
    }

    /// True when bytes of an unfinished message remain (the stream ended mid-message).
    var hasPartialMessage: Bool { self.framed && self.bufferedBytes > 0 }

    /// The bare message of an unframed body, once the body has ended (empty when the body was).
    mutating func endOfBody(allocator: ByteBufferAllocator) -> ByteBuffer {
        precondition(!self.framed, "only an unframed body ends as one message")
        let message = self.buffer ?? allocator.buffer(capacity: 0)
        self.buffer = nil
        return message
    }
}

/// Received messages waiting for a reader, and the flow-control bytes they hold.
///
/// HTTP/2 windows open again only for bytes the application has consumed. Queued (unread) messages keep their
/// size's worth of received bytes from going back, so a reader that stops makes its sender stop; bytes beyond
/// that (a message still incomplete while nothing is queued) go back at once, since a message may be larger
/// than the window (the receive limit bounds it). The invariant is `heldBytes <= queuedBytes`: what goes back
/// is exactly what exceeds the size of the queued messages, when a message arrives and when one is read.
/// (An earlier version returned a read message's full size, though part of it had gone back while it was
/// partial: the count went negative, later bytes were never returned, and ~1 MB messages stalled a 1 MiB
/// window until the body timeout.)
///
/// An array with a moving head, which costs no allocation until the first message arrives (most calls see one).
struct InboundMessages {
    private var deframer: MessageDeframer
    private var messages: [ByteBuffer] = []
    private var head = 0
    /// The framed size of the queued messages: the bytes they may keep from the window.
    private(set) var queuedBytes = 0
    /// Bytes received and not yet returned to the window (never more than `queuedBytes`).
    private(set) var heldBytes = 0

    init(maxMessageSize: Int, framed: Bool = true) {
        self.deframer = MessageDeframer(maxMessageSize: maxMessageSize, framed: framed)
    }

    var count: Int { self.messages.count - self.head }
    var isEmpty: Bool { self.head == self.messages.count }
    /// True when bytes of an unfinished message remain (the stream ended mid-message).
    var hasPartialMessage: Bool { self.deframer.hasPartialMessage }

    /// Takes received DATA bytes and queues the messages they complete. Returns how many bytes go back to the
    /// window now. On a framing error nothing is queued any more and every byte held goes back
    /// (`ReceiveFailure.release`).
    mutating func receive(_ bytes: UnsafeRawBufferPointer, allocator: ByteBufferAllocator) throws(ReceiveFailure) -> Int {
        self.deframer.append(bytes, allocator: allocator)
        self.heldBytes += bytes.count
        do {
            while let message = try self.deframer.next() {
                self.queuedBytes += message.readableBytes + MessageFraming.headerSize
                self.messages.append(message)
            }
        } catch {
            throw ReceiveFailure(failure: error, release: self.removeAll())
        }
        return self.releaseExcess()
    }

    /// Queues an unframed body (Connect unary) as the request's one message once the body has ended. Its bytes
    /// went back to the window as they arrived (the receive limit bounds them).
    mutating func endOfUnframedBody(allocator: ByteBufferAllocator) {
        let message = self.deframer.endOfBody(allocator: allocator)
        self.queuedBytes += message.readableBytes + MessageFraming.headerSize
        self.messages.append(message)
    }

    struct ReceiveFailure: Error {
        var failure: MessageDeframer.Failure
        /// Bytes to return to the window.
        var release: Int

        /// The status a call whose request cannot be deframed ends with.
        var rpcError: RPCError { self.failure.rpcError }
    }

    /// The oldest message and the window bytes that go back now that it is read.
    mutating func removeFirst() -> (message: ByteBuffer, release: Int) {
        let message = self.messages[self.head]
        self.queuedBytes -= message.readableBytes + MessageFraming.headerSize
        self.head += 1
        if self.head == self.messages.count {
            self.messages.removeAll(keepingCapacity: true)
            self.head = 0
        }
        return (message, self.releaseExcess())
    }

    /// Drops every queued message; returns the window bytes held.
    @discardableResult
    mutating func removeAll() -> Int {
        let release = self.heldBytes
        self.messages.removeAll()
        self.head = 0
        self.queuedBytes = 0
        self.heldBytes = 0
        return release
    }

    private mutating func releaseExcess() -> Int {
        let excess = self.heldBytes - self.queuedBytes
        guard excess > 0 else { return 0 }
        self.heldBytes -= excess
        return excess
    }
}

extension MessageDeframer.Failure {
    /// The status of a call whose request broke the framing or the size limit.
    var rpcError: RPCError {
        switch self {
        case .messageTooLarge(let length, let limit):
            RPCError(.resourceExhausted, "Request message of \(length) bytes exceeds the limit of \(limit)")
        case .compressedWithoutEncoding:
            RPCError(.internalError, "Compressed message without grpc-encoding")
        case .invalidFlag:
            RPCError(.internalError, "Invalid message frame")
        }
    }
}
