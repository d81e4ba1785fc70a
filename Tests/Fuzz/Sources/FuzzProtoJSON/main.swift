// The proto3 JSON mapping (KindredProtoJSON) over every public request message of kindred.api.v1. The first byte
// picks the type and the direction. JSON input: whatever converts to binary decodes as the message, converts back
// to JSON, and that JSON converts to the same binary (JSON → binary → JSON → binary equal); the JSON we write is
// valid UTF-8. Binary input: what the protobuf decoder accepts converts to JSON, and that JSON converts back to a
// message equal to the decoded one (unknown fields aside). Errors are ProtoJSONError (typed throws).
import FuzzSupport
import KindredProto
import KindredProtoJSON
import KindredProtobuf

let requestTypes: [any ProtoMessage.Type] = ProtoRegistry.allMessageTypes.filter {
    $0.protoMessageName.hasPrefix("kindred.api.v1.") && $0.protoMessageName.hasSuffix("Request")
}

func fromJSON<Message: ProtoMessage>(_ type: Message.Type, _ json: [UInt8]) {
    let name = Message.protoMessageName
    guard let binary = try? ProtoJSON.binary(fromJSON: json, of: type) else { return }
    guard let message = try? Message(serializedBytes: binary) else {
        return require(false, "\(name): JSON converted to bytes the decoder refuses")
    }
    guard let written = try? ProtoJSON.json(fromBinary: binary, of: type) else {
        return require(false, "\(name): our binary does not convert back to JSON")
    }
    require(String(validating: written, as: UTF8.self) != nil, "\(name): written JSON is not UTF-8")
    guard let again = try? ProtoJSON.binary(fromJSON: written, of: type) else {
        return require(false, "\(name): our own JSON is refused: \(String(decoding: written, as: UTF8.self))")
    }
    // (A NaN is not equal to itself; the JSON written for it is compared below.)
    require((try? Message(serializedBytes: again)) == message || message != message, "\(name): JSON → binary → JSON → binary differs")
    require((try? ProtoJSON.json(fromBinary: again, of: type)) == written, "\(name): JSON output is not stable")
}

func fromBinary<Message: ProtoMessage>(_ type: Message.Type, _ bytes: [UInt8]) {
    let name = Message.protoMessageName
    guard let message = try? Message(serializedBytes: bytes) else {
        // Bytes the decoder refuses: the mapping may refuse them too, but must not crash.
        _ = try? ProtoJSON.json(fromBinary: bytes, of: type)
        return
    }
    guard let canonical = try? message.serializedBytes() else { return }
    guard let json = try? ProtoJSON.json(fromBinary: canonical, of: type) else {
        return require(false, "\(name): a decodable message does not convert to JSON")
    }
    guard let binary = try? ProtoJSON.binary(fromJSON: json, of: type) else {
        return require(false, "\(name): our own JSON is refused: \(String(decoding: json, as: UTF8.self))")
    }
    let back = try? Message(serializedBytes: binary)
    require(back == message || message != message, "\(name): binary → JSON → binary differs")
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzProtoJSON(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let choice = Int(input.byte())
    let type = requestTypes[(choice >> 1) % requestTypes.count]
    if choice & 1 == 0 {
        fromJSON(type, input.rest())
    } else {
        fromBinary(type, input.rest())
    }
    return 0
}

runFuzzer(fuzzProtoJSON)
