// The server's HTTP/2 input path below gRPC: a client's bytes (after the connection preface) through nghttp2 into
// KindredHTTP2's callbacks, with the server's configuration (100 streams, 16 KiB header lists, reset, CONTINUATION
// and SETTINGS limits) and its abuse budget charged for every frame that costs work without carrying any, as
// ServerConnectionHandler does. The server answers each finished request and returns DATA to the window. The first
// bytes choose how the input is split into reads. Beyond not crashing: requests only on odd (client) stream ids;
// never more than 100 streams open at once; no header block over the advertised 16 KiB list size delivered; no
// DATA delivered beyond what was sent, on a stream not opened or after its END_STREAM; no callback for a closed
// stream; a connection whose budget runs out is cut (nothing read after that) after at most `burst` tokens of
// events; failures are HTTP2SessionError.
import FuzzSupport
import KindredHTTP2
import NIOCore

let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
let budgetConfiguration = HTTP2AbuseBudget.Configuration()
let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

final class Server: HTTP2SessionDelegate {
    var open: Set<Int32> = []
    var ended: Set<Int32> = []
    var closed: Set<Int32> = []
    var dataBytes = 0
    var budget = HTTP2AbuseBudget(configuration: budgetConfiguration, now: now)
    var exhausted = false
    var charged = 0

    func http2Session(_ session: HTTP2Session, didReceiveHeaders headers: [HTTP2Header], streamID: Int32, endStream: Bool) {
        require(streamID > 0 && streamID % 2 == 1, "headers on stream \(streamID)")
        let size = headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 }
        require(size <= 1 << 14, "a header list of \(size) bytes delivered")
        if !self.open.contains(streamID) {
            require(!self.closed.contains(streamID), "headers on closed stream \(streamID)")
            self.open.insert(streamID)
            require(self.open.count <= 100, "\(self.open.count) streams open")
        }
        if endStream { self.finish(session, streamID) }
    }

    func http2Session(_ session: HTTP2Session, didReceiveData bytes: UnsafeRawBufferPointer, streamID: Int32) {
        require(self.open.contains(streamID) && !self.ended.contains(streamID), "DATA on stream \(streamID) not open")
        self.dataBytes += bytes.count
        session.consume(streamID: streamID, count: bytes.count)
    }

    func http2Session(_ session: HTTP2Session, didReceiveEndStream streamID: Int32) {
        require(self.open.contains(streamID), "END_STREAM on stream \(streamID) not open")
        self.finish(session, streamID)
    }

    func http2Session(_ session: HTTP2Session, streamClosed streamID: Int32, errorCode: HTTP2ErrorCode) {
        self.open.remove(streamID)
        self.closed.insert(streamID)
    }

    func http2Session(_ session: HTTP2Session, didReceivePing ack: Bool, payload: UInt64) {}
    func http2Session(_ session: HTTP2Session, didReceiveGoAway lastStreamID: Int32, errorCode: HTTP2ErrorCode) {}
    func http2Session(_ session: HTTP2Session, didSendData count: Int, streamID: Int32, pendingBytes: Int) {}

    func http2Session(_ session: HTTP2Session, observed event: HTTP2PeerEvent, streamID: Int32) {
        // The rest of the read that exhausted the budget is still parsed; the connection goes at its end.
        guard !self.exhausted else { return }
        self.charged += budgetConfiguration.cost(of: event)
        if !self.budget.charge(event, now: now) {
            self.exhausted = true
            session.goAway(errorCode: .enhanceYourCalm)
        }
    }

    private func finish(_ session: HTTP2Session, _ streamID: Int32) {
        guard !self.ended.contains(streamID) else { return require(false, "stream \(streamID) ended twice") }
        self.ended.insert(streamID)
        try? session.submitResponse(
            streamID: streamID, headers: [HTTP2Header(":status", "200"), HTTP2Header("content-type", "application/grpc")],
            endStream: false)
        session.sendData(streamID: streamID, ByteBuffer(bytes: [0, 0, 0, 0, 2, 8, 1]))
        session.finish(streamID: streamID, trailers: [HTTP2Header("grpc-status", "0")])
    }
}

func fuzzHTTP2Server(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let plan = input.take(4)
    let frames = input.rest()
    let bytes = preface + frames
    guard let session = try? HTTP2Session(role: .server) else {
        require(false, "no session")
        return 0
    }
    let server = Server()
    session.delegate = server
    defer { withExtendedLifetime(server) { session.delegate = nil } }
    var output = ByteBuffer()
    var offset = 0
    var step = 0
    while offset < bytes.count, !server.exhausted {
        // A plan byte of 0 reads everything left at once, n reads 8n bytes.
        let chunk = plan.isEmpty ? 0 : Int(plan[step % plan.count]) * 8
        let size = chunk == 0 ? bytes.count - offset : min(bytes.count - offset, chunk)
        step += 1
        do {
            try session.receive(ByteBuffer(bytes: bytes[offset..<(offset + size)]))
            output.clear()
            try session.write(into: &output, limit: 1 << 20)
        } catch {
            break  // a protocol error: the server closes the connection
        }
        offset += size
    }
    require(server.dataBytes <= frames.count, "\(server.dataBytes) DATA bytes from \(frames.count) bytes")
    require(server.charged <= budgetConfiguration.burst + budgetConfiguration.burst / 10, "\(server.charged) tokens charged")
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzHTTP2ServerEntry(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzHTTP2Server(start, count)
}

runFuzzer(fuzzHTTP2ServerEntry)
