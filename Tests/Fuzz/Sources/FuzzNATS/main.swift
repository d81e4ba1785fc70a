// The NATS protocol parser (KindredNATS NATSParser): a server's bytes, split into chunks as the input says, with
// limits the input picks. Beyond not crashing: chunking (and compacting the buffer between reads) never changes
// the operations or the failure; no message is larger than the payload limit; a message has a subject and a header
// status of three digits; failures are `malformed` or `tooLarge`, never another kind; and every operation
// written back in the protocol's own form parses again to the same operation.
import FuzzSupport
@testable import KindredNATS

struct Limits {
    var controlLine: Int
    var payload: Int
}

func parse(_ stream: [UInt8], chunks plan: [UInt8], limits: Limits) -> (operations: [NATSServerOperation], failed: Bool) {
    var parser = NATSParser(maxControlLine: limits.controlLine, maxPayload: limits.payload)
    var operations: [NATSServerOperation] = []
    for piece in chunks(of: stream, plan: plan) {
        parser.append(Array(piece))
        do {
            while let operation = try parser.next() { operations.append(operation) }
        } catch {
            require(error.kind == .malformed || error.kind == .tooLarge, "a server's bytes refused as \(error.kind)")
            return (operations, true)
        }
        parser.compact()
    }
    return (operations, false)
}

/// The operation as a server would send it.
func wire(_ operation: NATSServerOperation) -> [UInt8] {
    switch operation {
    case .info(let json): return Array("INFO ".utf8) + json + Array("\r\n".utf8)
    case .ping: return Array("PING\r\n".utf8)
    case .pong: return Array("PONG\r\n".utf8)
    case .ok: return Array("+OK\r\n".utf8)
    case .error(let text): return Array("-ERR '\(text)'\r\n".utf8)
    case .message(let message):
        let reply = message.replyTo.map { " \($0)" } ?? ""
        guard let headers = message.headers else {
            return Array("MSG \(message.subject) \(message.sid)\(reply) \(message.payload.count)\r\n".utf8)
                + message.payload + Array("\r\n".utf8)
        }
        var block = "NATS/1.0"
        if let status = headers.status {
            block += " \(status)"
            if !headers.statusDescription.isEmpty { block += " \(headers.statusDescription)" }
        }
        block += "\r\n"
        for field in headers.fields { block += "\(field.name): \(field.value)\r\n" }
        block += "\r\n"
        let header = Array(block.utf8)
        let total = header.count + message.payload.count
        return Array("HMSG \(message.subject) \(message.sid)\(reply) \(header.count) \(total)\r\n".utf8)
            + header + message.payload + Array("\r\n".utf8)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzNATS(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    // Small limits as often as the client's own, so that both sides of each limit are reached.
    let limits = input.byte() < 128
        ? Limits(controlLine: NATSParser.defaultMaxControlLine, payload: NATSParser.defaultMaxPayload)
        : Limits(controlLine: 8 + Int(input.byte()), payload: input.uint16())
    let plan = input.take(Int(input.byte() % 8))
    let stream = input.rest()
    let whole = parse(stream, chunks: [], limits: limits)
    let chunked = parse(stream, chunks: plan, limits: limits)
    require(whole.operations == chunked.operations && whole.failed == chunked.failed, "chunks changed the operations")
    for operation in whole.operations {
        if case .message(let message) = operation {
            let headerBytes = message.headers.map { _ in 10 } ?? 0
            require(message.payload.count + headerBytes <= limits.payload, "a message over \(limits.payload) bytes")
            require(!message.subject.isEmpty, "a message without a subject")
            if let status = message.headers?.status { require((100...999).contains(status), "header status \(status)") }
        }
        let again = parse(wire(operation), chunks: [], limits: Limits(controlLine: 1 << 30, payload: 1 << 30))
        require(!again.failed && again.operations == [operation], "\(operation) written back parses differently")
    }
    return 0
}

runFuzzer(fuzzNATS)
