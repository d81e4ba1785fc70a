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
    private var buffer: ByteBuffer?
    /// Bytes appended so far that belong to a message not yet complete.
    var bufferedBytes: Int { self.buffer?.readableBytes ?? 0 }

    init(maxMessageSize: Int) {
        self.maxMessageSize = maxMessageSize
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer, allocator: ByteBufferAllocator) {
        if self.buffer == nil {
            self.buffer = allocator.buffer(capacity: max(bytes.count, 64))
        }
        self.buffer!.writeBytes(bytes)
    }

    /// The next complete message, nil when more bytes are needed.
    mutating func next() throws(Failure) -> ByteBuffer? {
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
    var hasPartialMessage: Bool { self.bufferedBytes > 0 }
}

/// Received messages waiting for a reader: an array with a moving head, which costs no allocation until the
/// first message arrives (most calls see one message).
struct MessageQueue {
    private var messages: [ByteBuffer] = []
    private var head = 0

    var count: Int { self.messages.count - self.head }
    var isEmpty: Bool { self.head == self.messages.count }

    mutating func append(_ message: ByteBuffer) {
        self.messages.append(message)
    }

    mutating func removeFirst() -> ByteBuffer {
        let message = self.messages[self.head]
        self.head += 1
        if self.head == self.messages.count {
            self.messages.removeAll(keepingCapacity: true)
            self.head = 0
        }
        return message
    }

    mutating func removeAll() {
        self.messages.removeAll()
        self.head = 0
    }
}
