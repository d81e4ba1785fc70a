internal import CNghttp2
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Receives the events of an `HTTP2Session`. Called synchronously from inside `receive(_:)` and
/// `write(into:)`, on the thread that drives the session (the connection's event loop).
///
/// A delegate may call back into the session (submit a response, reset a stream) from these methods:
/// nghttp2 allows it, and the session never holds Swift exclusive access across a call into nghttp2.
public protocol HTTP2SessionDelegate: AnyObject {
    /// A complete header block (request or response headers, or trailers) arrived on a stream.
    func http2Session(_ session: HTTP2Session, didReceiveHeaders headers: [HTTP2Header], streamID: Int32, endStream: Bool)
    /// A chunk of a DATA frame's payload arrived. `bytes` is only valid during the call. The receiver must
    /// eventually report the bytes as consumed with `HTTP2Session.consume(streamID:count:)`.
    func http2Session(_ session: HTTP2Session, didReceiveData bytes: UnsafeRawBufferPointer, streamID: Int32)
    /// A DATA frame with END_STREAM arrived: the peer will send nothing more on the stream.
    func http2Session(_ session: HTTP2Session, didReceiveEndStream streamID: Int32)
    /// The stream closed, normally (`.noError`) or by reset.
    func http2Session(_ session: HTTP2Session, streamClosed streamID: Int32, errorCode: HTTP2ErrorCode)
    /// A PING frame arrived (`ack` is true for the answer to our own PING; `payload` is its opaque data as
    /// `ping(_:)` takes it).
    func http2Session(_ session: HTTP2Session, didReceivePing ack: Bool, payload: UInt64)
    /// The peer sent GOAWAY.
    func http2Session(_ session: HTTP2Session, didReceiveGoAway lastStreamID: Int32, errorCode: HTTP2ErrorCode)
    /// nghttp2 took `count` bytes of queued outbound DATA for `streamID`; `pendingBytes` remain queued.
    func http2Session(_ session: HTTP2Session, didSendData count: Int, streamID: Int32, pendingBytes: Int)
    /// A frame arrived that costs work without carrying a request or response (see `HTTP2PeerEvent`).
    /// Servers charge these to an abuse budget; the default implementation ignores them.
    func http2Session(_ session: HTTP2Session, observed event: HTTP2PeerEvent, streamID: Int32)
}

extension HTTP2SessionDelegate {
    public func http2Session(_ session: HTTP2Session, observed event: HTTP2PeerEvent, streamID: Int32) {}
}

/// One HTTP/2 connection's protocol state: an nghttp2 session driven with in-memory buffers.
///
/// The session does no I/O. The owner feeds received bytes to `receive(_:)` and writes what
/// `write(into:)` produces. It is not thread-safe: confine it to one event loop.
public final class HTTP2Session {
    public enum Role: Sendable { case server, client }

    public let role: Role
    public let configuration: HTTP2Configuration
    /// Events go here. Unowned: the delegate owns the session.
    public unowned(unsafe) var delegate: (any HTTP2SessionDelegate)?

    private var session: OpaquePointer?
    // Header block being received (HEADERS + CONTINUATION frames arrive contiguously).
    private var pendingHeaders: [HTTP2Header] = []
    private var pendingHeaderBytes = 0
    private var pendingHeaderRejected = false
    // The strings of the last header block, by position (see `interned`).
    private var recentNames: [String] = []
    private var recentValues: [String] = []
    // Outbound DATA queued per stream, drained by nghttp2's data source callback.
    private var outbound: [Int32: Outbound] = [:]
    /// Bytes queued by `sendData` on all streams and not yet taken by nghttp2.
    public private(set) var pendingOutboundBytes = 0
    // Reused storage for header blocks being submitted.
    fileprivate var scratchBytes: [UInt8] = []
    fileprivate var scratchPairs: [nghttp2_nv] = []

    /// Outbound state of one stream: bytes waiting for flow-control window and how the stream ends.
    private final class Outbound {
        var buffer: ByteBuffer
        var ended = false
        var trailers: [HTTP2Header]?
        var deferred = false
        init(buffer: ByteBuffer) { self.buffer = buffer }
    }

    /// Creates a session and queues our SETTINGS (and the client magic for clients).
    public init(role: Role, configuration: HTTP2Configuration = .init()) throws(HTTP2SessionError) {
        self.role = role
        self.configuration = configuration

        var callbacksPointer: OpaquePointer?
        try check(nghttp2_session_callbacks_new(&callbacksPointer), "session_callbacks_new")
        defer { nghttp2_session_callbacks_del(callbacksPointer) }
        let callbacks = callbacksPointer
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunkRecv)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, onInvalidFrameRecv)

        var optionPointer: OpaquePointer?
        try check(nghttp2_option_new(&optionPointer), "option_new")
        defer { nghttp2_option_del(optionPointer) }
        let option = optionPointer
        // Receive windows are replenished only when the application has consumed the bytes: this is
        // what makes a slow reader push back on its sender instead of growing our buffers.
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_stream_reset_rate_limit(
            option,
            configuration.streamResetBurst,
            configuration.streamResetRatePerSecond
        )
        nghttp2_option_set_max_continuations(option, configuration.maxContinuations)
        nghttp2_option_set_max_settings(option, configuration.maxSettingsEntries)
        nghttp2_option_set_max_outbound_ack(option, configuration.maxOutboundAcks)
        // Until the peer's SETTINGS arrive, assume it allows no more than we do.
        nghttp2_option_set_peer_max_concurrent_streams(option, configuration.maxConcurrentStreams)

        // `self` is fully initialised from here on; the session keeps an unretained pointer to it and is
        // deleted in deinit, before `self` goes away.
        let userData = Unmanaged.passUnretained(self).toOpaque()
        var sessionPointer: OpaquePointer?
        switch role {
        case .server:
            try check(nghttp2_session_server_new2(&sessionPointer, callbacks, userData, option), "session_server_new2")
        case .client:
            try check(nghttp2_session_client_new2(&sessionPointer, callbacks, userData, option), "session_client_new2")
        }
        self.session = sessionPointer

        var settings: [nghttp2_settings_entry] = [
            .init(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: configuration.maxConcurrentStreams),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: configuration.initialStreamWindowSize),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_MAX_FRAME_SIZE.rawValue), value: configuration.maxFrameSize),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: configuration.maxHeaderListSize),
        ]
        if role == .client {
            settings.append(.init(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0))
        }
        try check(
            nghttp2_submit_settings(sessionPointer, UInt8(NGHTTP2_FLAG_NONE.rawValue), settings, settings.count),
            "submit_settings"
        )
        try check(
            nghttp2_session_set_local_window_size(
                sessionPointer,
                UInt8(NGHTTP2_FLAG_NONE.rawValue),
                0,
                configuration.connectionWindowSize
            ),
            "session_set_local_window_size"
        )
    }

    deinit {
        nghttp2_session_del(self.session)
        self.session = nil
    }

    // MARK: Driving the session

    /// Feeds bytes read from the peer. Delegate callbacks run before this returns.
    /// Throws when the connection must be torn down (protocol error, flood, bad preface).
    public func receive(_ bytes: ByteBuffer) throws(HTTP2SessionError) {
        guard let session = self.session else { return }
        let result = bytes.withUnsafeReadableBytes { buffer -> Int in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
            return nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), buffer.count)
        }
        // nghttp2_session_mem_recv returns the bytes processed, or NGHTTP2_ERR_NOMEM,
        // NGHTTP2_ERR_CALLBACK_FAILURE, NGHTTP2_ERR_BAD_CLIENT_MAGIC, NGHTTP2_ERR_FLOODED: all fatal.
        if result < 0 { throw HTTP2SessionError(code: Int32(result), operation: "session_mem_recv") }
    }

    /// Appends the frames nghttp2 has ready to `buffer`, stopping once `buffer` holds `limit` bytes or more
    /// (so a peer that does not read cannot make us copy nghttp2's whole queue: what stays inside nghttp2 is
    /// bounded by flow control, the per-stream watermark and `maxOutboundAcks`). Returns whether anything
    /// was written.
    @discardableResult
    public func write(into buffer: inout ByteBuffer, limit: Int = .max) throws(HTTP2SessionError) -> Bool {
        guard let session = self.session else { return false }
        var wrote = false
        while buffer.readableBytes < limit {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            // Negative values are NGHTTP2_ERR_NOMEM or NGHTTP2_ERR_CALLBACK_FAILURE: fatal.
            if count < 0 { throw HTTP2SessionError(code: Int32(count), operation: "session_mem_send") }
            guard count > 0, let data else { return wrote }
            buffer.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
            wrote = true
        }
        return wrote
    }

    /// Whether the session still expects to read or write; when both are false the connection can close.
    public var isActive: Bool {
        guard let session = self.session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    /// Whether nghttp2 has frames waiting to be written.
    public var wantsWrite: Bool {
        guard let session = self.session else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    /// The highest stream id the peer opened that we processed (for GOAWAY).
    public var lastProcessedStreamID: Int32 {
        guard let session = self.session else { return 0 }
        return nghttp2_session_get_last_proc_stream_id(session)
    }

    /// The bytes in HPACK's dynamic tables (RFC 7541 §4.1): the encoder's, of the fields this side sent with
    /// indexing, and the decoder's, of those the peer did.
    var headerTableSizes: (encoder: Int, decoder: Int) {
        guard let session = self.session else { return (0, 0) }
        return (
            nghttp2_session_get_hd_deflate_dynamic_table_size(session),
            nghttp2_session_get_hd_inflate_dynamic_table_size(session)
        )
    }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS.
    public var remoteMaxConcurrentStreams: UInt32 {
        guard let session = self.session else { return 0 }
        return nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
    }

    // MARK: Submitting frames

    /// Submits response headers. With `endStream` the stream ends with this HEADERS frame (a trailers-only
    /// gRPC response); otherwise DATA follows through `sendData` and `finish`.
    public func submitResponse(streamID: Int32, headers: [HTTP2Header], endStream: Bool) throws(HTTP2SessionError) {
        guard let session = self.session else { return }
        let rc: Int32
        if endStream {
            rc = self.withNameValuePairs(headers) { nva, count in
                nghttp2_submit_response(session, streamID, nva, count, nil)
            }
        } else {
            self.outbound[streamID] = Outbound(buffer: ByteBuffer())
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: onDataSourceRead)
            rc = self.withNameValuePairs(headers) { nva, count in
                nghttp2_submit_response(session, streamID, nva, count, &provider)
            }
        }
        // nghttp2_submit_response: NGHTTP2_ERR_INVALID_ARGUMENT (stream 0), NGHTTP2_ERR_DATA_EXIST (already
        // responded), NGHTTP2_ERR_PROTO (client session), NGHTTP2_ERR_NOMEM.
        if rc != 0 {
            self.outbound.removeValue(forKey: streamID)
            throw HTTP2SessionError(code: rc, operation: "submit_response")
        }
    }

    /// Opens a request stream (client sessions). DATA follows through `sendData` and `finish`.
    public func submitRequest(headers: [HTTP2Header]) throws(HTTP2SessionError) -> Int32 {
        guard let session = self.session else {
            throw HTTP2SessionError(code: Int32(NGHTTP2_ERR_INVALID_STATE.rawValue), operation: "submit_request")
        }
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: onDataSourceRead)
        let streamID = self.withNameValuePairs(headers) { nva, count in
            nghttp2_submit_request(session, nil, nva, count, &provider, nil)
        }
        // Negative: NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE (ids exhausted), NGHTTP2_ERR_PROTO, NGHTTP2_ERR_NOMEM.
        if streamID < 0 { throw HTTP2SessionError(code: streamID, operation: "submit_request") }
        self.outbound[streamID] = Outbound(buffer: ByteBuffer())
        return streamID
    }

    /// Queues DATA for a stream opened with a body. nghttp2 sends it as flow control allows.
    public func sendData(streamID: Int32, _ bytes: ByteBuffer) {
        guard let out = self.outbound[streamID], !out.ended else { return }
        self.pendingOutboundBytes += bytes.readableBytes
        if out.buffer.readableBytes == 0 {
            // Nothing queued: keep the caller's buffer itself (no copy of the message).
            out.buffer = bytes
        } else {
            var bytes = bytes
            out.buffer.writeBuffer(&bytes)
        }
        self.resumeIfDeferred(streamID: streamID, out)
    }

    /// Ends the outbound side of a stream once its queued DATA is sent: with trailers (a HEADERS frame with
    /// END_STREAM), or with END_STREAM on the last DATA frame when `trailers` is nil.
    public func finish(streamID: Int32, trailers: [HTTP2Header]?) {
        guard let out = self.outbound[streamID], !out.ended else { return }
        out.ended = true
        out.trailers = trailers
        self.resumeIfDeferred(streamID: streamID, out)
    }

    /// Bytes queued for a stream and not yet taken by nghttp2.
    public func pendingOutboundBytes(streamID: Int32) -> Int {
        self.outbound[streamID]?.buffer.readableBytes ?? 0
    }

    /// Resets a stream (RST_STREAM). Unknown or closed streams are ignored.
    public func resetStream(streamID: Int32, errorCode: HTTP2ErrorCode) {
        guard let session = self.session else { return }
        self.removeOutbound(streamID: streamID)
        // Fails only with NGHTTP2_ERR_INVALID_ARGUMENT (stream 0) or NGHTTP2_ERR_NOMEM; a reset of a stream that
        // is already gone is a no-op for nghttp2.
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode.rawValue)
    }

    /// Tells nghttp2 the application consumed `count` received DATA bytes, so it may open the window again.
    public func consume(streamID: Int32, count: Int) {
        guard let session = self.session, count > 0 else { return }
        // NGHTTP2_ERR_INVALID_ARGUMENT for stream 0 (never passed), NGHTTP2_ERR_INVALID_STATE when automatic
        // window updates are on (never here), NGHTTP2_ERR_NOMEM. A closed stream only updates the connection.
        let rc = nghttp2_session_consume(session, streamID, count)
        if rc != 0 && rc != Int32(NGHTTP2_ERR_INVALID_ARGUMENT.rawValue) {
            _ = nghttp2_session_consume_connection(session, count)
        }
    }

    /// Sends GOAWAY. `lastStreamID` nil means the last stream we processed.
    public func goAway(errorCode: HTTP2ErrorCode, lastStreamID: Int32? = nil, debugData: String = "") {
        guard let session = self.session else { return }
        let last = lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session)
        var debug = Array(debugData.utf8)
        // Fails with NGHTTP2_ERR_INVALID_ARGUMENT for a bad last stream id and NGHTTP2_ERR_NOMEM; a second GOAWAY
        // with a higher id is silently ignored by nghttp2, which is what we want.
        _ = debug.withUnsafeMutableBufferPointer { buffer in
            nghttp2_submit_goaway(
                session,
                UInt8(NGHTTP2_FLAG_NONE.rawValue),
                last,
                errorCode.rawValue,
                buffer.baseAddress,
                buffer.count
            )
        }
    }

    /// Sends a GOAWAY with the highest stream id, telling the peer to open no new streams (graceful shutdown).
    public func shutdownNotice() {
        guard let session = self.session, self.role == .server else { return }
        // Only NGHTTP2_ERR_INVALID_STATE for client sessions, excluded above.
        _ = nghttp2_submit_shutdown_notice(session)
    }

    /// Sends a PING with the given 8 opaque bytes.
    public func ping(_ payload: UInt64 = 0) {
        guard let session = self.session else { return }
        var payload = payload
        // Fails only with NGHTTP2_ERR_NOMEM.
        _ = withUnsafeBytes(of: &payload) { raw in
            nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), raw.baseAddress?.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// Whether the stream is still open at the protocol level.
    public func isOpen(streamID: Int32) -> Bool {
        guard let session = self.session else { return false }
        return nghttp2_session_find_stream(session, streamID) != nil
    }

    /// Whether our END_STREAM on the stream went out while the peer's side is still open (half-closed local):
    /// a server that answered before the request ended then resets the stream with NO_ERROR (RFC 9113 §8.1).
    /// False for streams that are closed, unknown, or not ended on our side yet.
    public func isHalfClosedLocal(streamID: Int32) -> Bool {
        guard let session = self.session else { return false }
        // Each returns 1 (closed), 0 (open) or -1 (no such stream).
        return nghttp2_session_get_stream_local_close(session, streamID) == 1
            && nghttp2_session_get_stream_remote_close(session, streamID) == 0
    }

    // MARK: Internals used by the C callbacks

    private func removeOutbound(streamID: Int32) {
        if let out = self.outbound.removeValue(forKey: streamID) {
            self.pendingOutboundBytes -= out.buffer.readableBytes
        }
    }

    private func resumeIfDeferred(streamID: Int32, _ out: Outbound) {
        guard out.deferred, let session = self.session else { return }
        out.deferred = false
        // NGHTTP2_ERR_INVALID_ARGUMENT when the stream has no deferred data (already resumed): harmless.
        _ = nghttp2_session_resume_data(session, streamID)
    }

    fileprivate func beginHeaders() {
        self.pendingHeaders.removeAll(keepingCapacity: true)
        self.pendingHeaderBytes = 0
        self.pendingHeaderRejected = false
    }

    /// Returns false when the block exceeds the header list limit.
    fileprivate func appendHeader(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        self.pendingHeaderBytes += name.count + value.count + 32
        if self.pendingHeaderBytes > Int(self.configuration.maxHeaderListSize) {
            self.pendingHeaderRejected = true
            self.pendingHeaders.removeAll(keepingCapacity: true)
            return false
        }
        let index = self.pendingHeaders.count
        self.pendingHeaders.append(
            HTTP2Header(
                Self.interned(name, at: index, in: &self.recentNames),
                Self.interned(value, at: index, in: &self.recentValues)
            )
        )
        return true
    }

    /// The string for `bytes`, reusing the one received at the same position of the previous header block when
    /// the bytes are the same: a client sends the same names, and mostly the same values (path, content-type,
    /// user-agent), in the same order on every request, and each string over 15 bytes would be a new allocation.
    private static func interned(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int, in cache: inout [String]) -> String {
        if index < cache.count {
            var cached = cache[index]
            // memcmp: the generic elementsEqual took ~20 instructions a byte, on every header of every request.
            if cached.utf8.count == bytes.count,
                bytes.count == 0 || cached.withUTF8({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 })
            {
                return cached
            }
            cached = String(decoding: bytes, as: UTF8.self)
            cache[index] = cached
            return cached
        }
        let fresh = String(decoding: bytes, as: UTF8.self)
        if index == cache.count && index < 32 { cache.append(fresh) }
        return fresh
    }

    fileprivate func headersComplete(streamID: Int32, endStream: Bool) {
        guard !self.pendingHeaderRejected else { return }
        let headers = self.pendingHeaders
        self.pendingHeaders.removeAll(keepingCapacity: true)
        self.delegate?.http2Session(self, didReceiveHeaders: headers, streamID: streamID, endStream: endStream)
    }

    fileprivate func dataChunk(streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        self.delegate?.http2Session(self, didReceiveData: bytes, streamID: streamID)
    }

    fileprivate func endStream(streamID: Int32) {
        self.delegate?.http2Session(self, didReceiveEndStream: streamID)
    }

    fileprivate func streamClosed(streamID: Int32, errorCode: UInt32) {
        self.removeOutbound(streamID: streamID)
        self.delegate?.http2Session(self, streamClosed: streamID, errorCode: HTTP2ErrorCode(errorCode))
    }

    fileprivate func pingReceived(ack: Bool, payload: UInt64) {
        self.delegate?.http2Session(self, didReceivePing: ack, payload: payload)
    }

    fileprivate func observed(_ event: HTTP2PeerEvent, streamID: Int32 = 0) {
        self.delegate?.http2Session(self, observed: event, streamID: streamID)
    }

    fileprivate func goAwayReceived(lastStreamID: Int32, errorCode: UInt32) {
        self.delegate?.http2Session(self, didReceiveGoAway: lastStreamID, errorCode: HTTP2ErrorCode(errorCode))
    }

    /// nghttp2 asks for up to `length` bytes of DATA for `streamID`.
    fileprivate func readData(
        streamID: Int32,
        into destination: UnsafeMutablePointer<UInt8>,
        length: Int,
        flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let out = self.outbound[streamID] else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        let count = min(length, out.buffer.readableBytes)
        if count > 0 {
            out.buffer.withUnsafeReadableBytes { source in
                destination.update(from: source.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count)
            }
            out.buffer.moveReaderIndex(forwardBy: count)
            self.pendingOutboundBytes -= count
        }
        let remaining = out.buffer.readableBytes
        if remaining == 0 {
            if out.ended {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                if let trailers = out.trailers, let session = self.session {
                    flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                    // Allowed inside this callback; fails only with NGHTTP2_ERR_NOMEM or for an invalid stream,
                    // in which case the stream is already going away.
                    let rc = self.withNameValuePairs(trailers) { nva, n in nghttp2_submit_trailer(session, streamID, nva, n) }
                    if rc != 0 { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                }
                self.outbound.removeValue(forKey: streamID)
            } else if count == 0 {
                out.deferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        if count > 0 {
            self.delegate?.http2Session(self, didSendData: count, streamID: streamID, pendingBytes: remaining)
        }
        return count
    }
}

// MARK: - C callbacks

/// Recovers the session from nghttp2's user data. The pointer is unretained and valid while the session lives
/// (the nghttp2 session is deleted in `HTTP2Session.deinit`, so callbacks never outlive it).
private func owner(_ userData: UnsafeMutableRawPointer?) -> HTTP2Session? {
    guard let userData else { return nil }
    return Unmanaged<HTTP2Session>.fromOpaque(userData).takeUnretainedValue()
}

private func onBeginHeaders(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    owner(userData)?.beginHeaders()
    return 0
}

private func onHeader(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ name: UnsafePointer<UInt8>?,
    _ nameLength: Int,
    _ value: UnsafePointer<UInt8>?,
    _ valueLength: Int,
    _ flags: UInt8,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let owner = owner(userData), let frame else { return 0 }
    let accepted = owner.appendHeader(
        name: UnsafeBufferPointer(start: name, count: nameLength),
        value: UnsafeBufferPointer(start: value, count: valueLength)
    )
    if !accepted {
        owner.observed(.headerListTooLarge, streamID: frame.pointee.hd.stream_id)
        // Over SETTINGS_MAX_HEADER_LIST_SIZE: reset just this stream. Returning TEMPORAL_CALLBACK_FAILURE
        // makes nghttp2 drop the rest of the block; the RST_STREAM we submit carries our own code.
        _ = nghttp2_submit_rst_stream(
            session,
            UInt8(NGHTTP2_FLAG_NONE.rawValue),
            frame.pointee.hd.stream_id,
            HTTP2ErrorCode.enhanceYourCalm.rawValue
        )
        return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    return 0
}

private func onFrameRecv(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let owner = owner(userData), let frame else { return 0 }
    let header = frame.pointee.hd
    let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    switch UInt32(header.type) {
    case NGHTTP2_HEADERS.rawValue:
        owner.headersComplete(streamID: header.stream_id, endStream: endStream)
    case NGHTTP2_DATA.rawValue:
        if endStream {
            owner.endStream(streamID: header.stream_id)
        } else if header.length <= frame.pointee.data.padlen {
            owner.observed(.emptyData, streamID: header.stream_id)
        }
    case NGHTTP2_WINDOW_UPDATE.rawValue:
        if frame.pointee.window_update.window_size_increment < HTTP2PeerEvent.smallWindowUpdateThreshold {
            owner.observed(.smallWindowUpdate, streamID: header.stream_id)
        }
    case NGHTTP2_SETTINGS.rawValue:
        if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { owner.observed(.settings) }
    case NGHTTP2_RST_STREAM.rawValue:
        owner.observed(.streamReset, streamID: header.stream_id)
    case NGHTTP2_PRIORITY.rawValue:
        owner.observed(.priority, streamID: header.stream_id)
    case NGHTTP2_PING.rawValue:
        // The opaque data read back the way `ping(_:)` wrote it (host byte order).
        let payload = withUnsafeBytes(of: frame.pointee.ping.opaque_data) { $0.loadUnaligned(as: UInt64.self) }
        owner.pingReceived(ack: header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0, payload: payload)
    case NGHTTP2_GOAWAY.rawValue:
        owner.goAwayReceived(lastStreamID: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code)
    default:
        break
    }
    return 0
}

private func onInvalidFrameRecv(
    _ session: OpaquePointer?,
    _ frame: UnsafePointer<nghttp2_frame>?,
    _ errorCode: Int32,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    owner(userData)?.observed(.invalidFrame, streamID: frame?.pointee.hd.stream_id ?? 0)
    return 0
}

private func onDataChunkRecv(
    _ session: OpaquePointer?,
    _ flags: UInt8,
    _ streamID: Int32,
    _ data: UnsafePointer<UInt8>?,
    _ length: Int,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let owner = owner(userData) else { return 0 }
    owner.dataChunk(streamID: streamID, UnsafeRawBufferPointer(start: data, count: length))
    return 0
}

private func onStreamClose(
    _ session: OpaquePointer?,
    _ streamID: Int32,
    _ errorCode: UInt32,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    owner(userData)?.streamClosed(streamID: streamID, errorCode: errorCode)
    return 0
}

private func onDataSourceRead(
    _ session: OpaquePointer?,
    _ streamID: Int32,
    _ buffer: UnsafeMutablePointer<UInt8>?,
    _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?,
    _ source: UnsafeMutablePointer<nghttp2_data_source>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let owner = owner(userData), let buffer, let flags else {
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    return owner.readData(streamID: streamID, into: buffer, length: length, flags: flags)
}

// MARK: - Helpers

/// Lays out the headers as nghttp2_nv entries over one contiguous byte buffer. nghttp2 copies them during the
/// submit call, so the storage only has to live for `body`. The buffers are the session's scratch space, taken
/// out for the call (so a nested use would simply allocate) and put back for the next one.
extension HTTP2Session {
    fileprivate func withNameValuePairs<R>(
        _ headers: [HTTP2Header],
        _ body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        var storage = self.scratchBytes
        var nva = self.scratchPairs
        self.scratchBytes = []
        self.scratchPairs = []
        defer {
            storage.removeAll(keepingCapacity: true)
            nva.removeAll(keepingCapacity: true)
            self.scratchBytes = storage
            self.scratchPairs = nva
        }
        var total = 0
        for header in headers { total += header.name.utf8.count + header.value.utf8.count }
        storage.reserveCapacity(max(total, 1))
        for header in headers {
            storage.append(contentsOf: header.name.utf8)
            storage.append(contentsOf: header.value.utf8)
        }
        return storage.withUnsafeMutableBufferPointer { bytes in
            // Capacity is at least 1, so the base address exists even when every header is empty.
            let base = bytes.baseAddress!
            var offset = 0
            for header in headers {
                let nameLength = header.name.utf8.count
                let valueLength = header.value.utf8.count
                nva.append(
                    nghttp2_nv(
                        name: base + offset,
                        value: base + offset + nameLength,
                        namelen: nameLength,
                        valuelen: valueLength,
                        flags: UInt8(header.indexed ? NGHTTP2_NV_FLAG_NONE.rawValue : NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
                    )
                )
                offset += nameLength + valueLength
            }
            if nva.isEmpty {
                nva.append(nghttp2_nv(name: base, value: base, namelen: 0, valuelen: 0, flags: 0))
                return nva.withUnsafeBufferPointer { body($0.baseAddress!, 0) }
            }
            return nva.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}

private func check(_ rc: Int32, _ operation: String) throws(HTTP2SessionError) {
    if rc != 0 { throw HTTP2SessionError(code: rc, operation: operation) }
}

extension HTTP2SessionError {
    init(code: Int32, operation: String) {
        self.init(code: code, operation: operation, message: String(cString: nghttp2_strerror(code)))
    }
}
