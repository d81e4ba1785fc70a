// The yardstick of Tests/Benchmarks/grpc-h2load.sh: the bare stack Kindred's gRPC runtime is built on (SwiftNIO,
// nghttp2, protobuf-c) serving one unary method, InteropService/Echo, with none of the runtime's features (no
// deadlines, metadata, limits, metrics, request ids, tasks). What it does per request is the least any server on
// this stack must do, so Kindred's throughput divided by its throughput says what the features cost.
//
// It imports CNghttp2 itself (the one exception to "one importer per C module"): going through KindredHTTP2
// would measure that wrapper as part of the floor.
//
// Usage: kindred-grpc-yardstick [port]   (0 or none: a free port). Prints `LISTENING host:port`.
import CNghttp2
import KindredProto
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

typealias V1 = Kindred.Testing.V1

/// One connection: an nghttp2 server session fed from the channel, answering every request stream with an
/// EchoResponse carrying the request's message.
final class YardstickHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var session: OpaquePointer?
    private var context: ChannelHandlerContext?
    /// Request bodies being received, by stream.
    private var requests: [Int32: [UInt8]] = [:]
    /// Framed responses being sent, by stream (nghttp2 pulls them through `read`).
    private var responses: [Int32: (bytes: [UInt8], offset: Int)] = [:]

    private static let responseHeaders = StaticHeaders([(":status", "200"), ("content-type", "application/grpc")])
    private static let trailers = StaticHeaders([("grpc-status", "0")])

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
            owner(user).requests[stream, default: []].append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            let header = frame.pointee.hd
            let type = UInt32(header.type)
            if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
                type == NGHTTP2_DATA.rawValue || type == NGHTTP2_HEADERS.rawValue
            {
                owner(user).respond(stream: header.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, _, user in
            let handler = owner(user)
            handler.requests.removeValue(forKey: stream)
            handler.responses.removeValue(forKey: stream)
            return 0
        }
        nghttp2_session_server_new(&self.session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: 100)]
        nghttp2_submit_settings(self.session, 0, &settings, 1)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        nghttp2_session_del(self.session)
        self.session = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = self.unwrapInboundIn(data)
        let consumed = bytes.withUnsafeReadableBytes { raw in
            nghttp2_session_mem_recv(self.session, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), raw.count)
        }
        if consumed < 0 { context.close(promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        var out = context.channel.allocator.buffer(capacity: 16_384)
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(self.session, &data)
            if count <= 0 { break }
            out.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
        }
        if out.readableBytes > 0 { context.writeAndFlush(self.wrapOutboundOut(out), promise: nil) }
        if nghttp2_session_want_read(self.session) == 0 && nghttp2_session_want_write(self.session) == 0 {
            context.close(promise: nil)
        }
    }

    private func respond(stream: Int32) {
        let body = self.requests.removeValue(forKey: stream) ?? []
        var response = V1.EchoResponse()
        if body.count >= 5, let request = try? body[5...].withUnsafeBytes({ try V1.EchoRequest(serializedBytes: $0) }) {
            response.message = request.message
        }
        let framed: [UInt8]? = try? response.withUnsafeSerializedBytes { message in
            var framed = [UInt8](repeating: 0, count: 5)
            framed[1] = UInt8(truncatingIfNeeded: message.count >> 24)
            framed[2] = UInt8(truncatingIfNeeded: message.count >> 16)
            framed[3] = UInt8(truncatingIfNeeded: message.count >> 8)
            framed[4] = UInt8(truncatingIfNeeded: message.count)
            framed.append(contentsOf: message)
            return framed
        }
        self.responses[stream] = (framed ?? [0, 0, 0, 0, 0], 0)
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) { session, stream, buffer, length, flags, _, user in
            let handler = owner(user)
            guard let buffer, let flags, let pending = handler.responses[stream] else {
                return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
            }
            let count = min(length, pending.bytes.count - pending.offset)
            pending.bytes.withUnsafeBufferPointer { source in
                buffer.update(from: source.baseAddress! + pending.offset, count: count)
            }
            if pending.offset + count == pending.bytes.count {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                handler.responses.removeValue(forKey: stream)
                let trailers = YardstickHandler.trailers
                _ = nghttp2_submit_trailer(session, stream, trailers.nva, trailers.count)
            } else {
                handler.responses[stream]!.offset += count
            }
            return count
        }
        _ = nghttp2_submit_response(self.session, stream, Self.responseHeaders.nva, Self.responseHeaders.count, &provider)
    }
}

private func owner(_ user: UnsafeMutableRawPointer?) -> YardstickHandler {
    Unmanaged<YardstickHandler>.fromOpaque(user!).takeUnretainedValue()
}

/// A header block laid out once for the whole process (nghttp2 copies it at each submit).
final class StaticHeaders: @unchecked Sendable {
    // Written once in init, read-only afterwards.
    let nva: UnsafeMutablePointer<nghttp2_nv>
    let count: Int

    init(_ headers: [(String, String)]) {
        self.count = headers.count
        self.nva = .allocate(capacity: headers.count)
        for (index, (name, value)) in headers.enumerated() {
            let nameBytes = UnsafeMutableRawPointer(strdup(name)!).assumingMemoryBound(to: UInt8.self)
            let valueBytes = UnsafeMutableRawPointer(strdup(value)!).assumingMemoryBound(to: UInt8.self)
            self.nva[index] = nghttp2_nv(
                name: nameBytes, value: valueBytes, namelen: name.utf8.count, valuelen: value.utf8.count, flags: 0)
        }
    }
}

let port = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 0 : 0
let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    .serverChannelOption(.backlog, value: 256)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(YardstickHandler()) }
    }
    .bind(host: "127.0.0.1", port: port)
    .wait()
print("LISTENING 127.0.0.1:\(channel.localAddress!.port!)")
fflush(nil)
try channel.closeFuture.wait()
