// The protobuf decoder (protobuf-c through KindredProtobuf) over every public request message of kindred.api.v1.
// The first byte picks the message type, the rest is the message. Beyond not crashing: whatever decodes encodes,
// re-decodes equal (decode → encode → decode; by bytes where a NaN makes values unequal), encodes to the same bytes again, and its serialized size is the
// length of its encoding; what does not decode throws a ProtoError (the typed throw guarantees the type).
import FuzzSupport
import KindredProto
import KindredProtobuf

let requestTypes: [any ProtoMessage.Type] = ProtoRegistry.allMessageTypes.filter {
    $0.protoMessageName.hasPrefix("kindred.api.v1.") && $0.protoMessageName.hasSuffix("Request")
}

func roundTrip<Message: ProtoMessage>(_: Message.Type, _ bytes: [UInt8]) {
    guard let message = try? Message(serializedBytes: bytes) else { return }
    let name = Message.protoMessageName
    guard let encoded = try? message.serializedBytes() else { return require(false, "\(name) decoded but does not encode") }
    require(message.serializedSize == encoded.count, "\(name): serializedSize \(message.serializedSize) ≠ \(encoded.count)")
    guard let again = try? Message(serializedBytes: encoded) else {
        return require(false, "\(name): its own encoding does not decode")
    }
    // A message holding a NaN is not equal to itself: its encoding (checked next) stands for it.
    require(again == message || message != message, "\(name): decode → encode → decode differs")
    require((try? again.serializedBytes()) == encoded, "\(name): encoding is not stable")
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzProtobuf(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let type = requestTypes[Int(input.byte()) % requestTypes.count]
    roundTrip(type, input.rest())
    return 0
}

runFuzzer(fuzzProtobuf)
