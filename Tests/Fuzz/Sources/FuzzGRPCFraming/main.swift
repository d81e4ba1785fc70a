// gRPC length-prefixed framing (KindredGRPC's InboundMessages over MessageDeframer): DATA bytes arrive in chunks
// the input chooses, with reads interleaved, under a receive limit the input chooses. Beyond not crashing: the
// messages equal those of an independent reading of the same bytes; a failure is the documented one (flag 1
// without an encoding, a flag other than 0/1, a length over the limit) at the same message; no message exceeds the
// limit; and flow control balances: bytes held never exceed the bytes queued, and every received byte goes back
// to the window exactly once when everything is read or on failure.
import FuzzSupport
@testable import KindredGRPC
import NIOCore

/// What a straightforward reading of the whole stream gives: complete messages, then the failure if any.
func reference(_ bytes: [UInt8], limit: Int) -> (messages: [[UInt8]], failure: MessageDeframer.Failure?) {
    var messages: [[UInt8]] = []
    var index = 0
    while bytes.count - index >= 5 {
        let flag = bytes[index]
        let length = Int(bytes[index + 1]) << 24 | Int(bytes[index + 2]) << 16 | Int(bytes[index + 3]) << 8
            | Int(bytes[index + 4])
        if flag == 1 { return (messages, .compressedWithoutEncoding) }
        if flag != 0 { return (messages, .invalidFlag(flag)) }
        if length > limit { return (messages, .messageTooLarge(length: length, limit: limit)) }
        guard bytes.count - index - 5 >= length else { break }
        messages.append(Array(bytes[(index + 5)..<(index + 5 + length)]))
        index += 5 + length
    }
    return (messages, nil)
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzGRPCFraming(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let limit = [0, 1, 16, 300, 4 << 20][Int(input.byte()) % 5]
    let plan = input.take(8)  // chunk sizes and when to read
    let stream = input.rest()
    let expected = reference(stream, limit: limit)

    var inbound = InboundMessages(maxMessageSize: limit)
    var received: [[UInt8]] = []
    var returned = 0
    var failure: MessageDeframer.Failure?
    var offset = 0
    var step = 0
    func read(all: Bool) {
        while !inbound.isEmpty {
            let (message, release) = inbound.removeFirst()
            returned += release
            require(message.readableBytes <= limit, "a message of \(message.readableBytes) bytes passed a limit of \(limit)")
            received.append(Array(message.readableBytesView))
            if !all { break }
        }
    }
    while offset < stream.count, failure == nil {
        let choice = plan.isEmpty ? 0 : Int(plan[step % plan.count])
        step += 1
        let size = min(stream.count - offset, 1 + choice % 23)
        let result = stream[offset..<(offset + size)].withUnsafeBytes { chunk in
            Result { () throws(InboundMessages.ReceiveFailure) in try inbound.receive(chunk, allocator: ByteBufferAllocator()) }
        }
        switch result {
        case .success(let release): returned += release
        case .failure(let error):
            failure = error.failure
            returned += error.release
        }
        offset += size
        require(inbound.heldBytes <= inbound.queuedBytes, "held \(inbound.heldBytes) > queued \(inbound.queuedBytes)")
        if choice & 0x40 != 0 { read(all: choice & 0x80 != 0) }
    }
    read(all: true)
    if failure == nil, inbound.hasPartialMessage {
        // The stream ended mid-message: the runtime answers INTERNAL and drops what is buffered.
        returned += inbound.removeAll()
    }
    require(failure == expected.failure, "failure \(String(describing: failure)) ≠ \(String(describing: expected.failure))")
    // After a failure the messages still queued are dropped, so those read are a prefix of the reference's.
    let matches = failure == nil ? received == expected.messages : expected.messages.starts(with: received)
    require(matches, "messages differ from the reference reading")
    if failure == nil {
        require(returned == offset, "window: \(returned) bytes returned of \(offset) received")
    } else {
        // Nothing is queued after a failure: every byte taken in so far went back.
        require(inbound.isEmpty && returned == offset, "window after failure: \(returned) of \(offset)")
    }
    return 0
}

runFuzzer(fuzzGRPCFraming)
