import KindredHTTP2
import NIOCore

/// Output: what nghttp2 has queued goes out once per read batch or event-loop tick, and answers given before a
/// call exists (refusals, CORS preflights, HTTP errors).
extension ServerConnectionHandler {
    /// Writes what nghttp2 has queued, while the channel is writable (see `outboundFlushLimit`). Called at the
    /// end of each read batch, when the channel becomes writable again and, for output produced by handlers,
    /// once per event-loop tick so responses finished together go out in one write.
    func flushOutput() {
        guard let session = self.session, let context = self.context else { return }
        do {
            try session.flush(to: context, limit: self.configuration.outboundFlushLimit)
            if !self.answeredEarly.isEmpty && self.resetAnsweredEarly(session) {
                try session.flush(to: context, limit: self.configuration.outboundFlushLimit)
            }
        } catch {
            self.logger.error("HTTP/2 session failed", metadata: ["error": "\(error)"])
            self.closeConnection()
            return
        }
        if !session.isActive || (self.lifecycle.isDrained && !session.wantsWrite) {
            // nghttp2 wants neither to read nor write (it sent GOAWAY after a flood or an error), or a drained
            // connection has nothing left to do.
            self.closeConnection()
        }
    }

    /// Resets with NO_ERROR the streams whose status went out before their request ended (gRPC over HTTP/2, RFC
    /// 9113 §8.1): the client stops sending, and the stream stops counting against its concurrency limit. Only
    /// once the status is on the wire: a reset queued earlier would make nghttp2 drop the status itself. Streams
    /// whose request ended meanwhile closed by themselves. Returns whether a reset was queued.
    private func resetAnsweredEarly(_ session: HTTP2Session) -> Bool {
        var reset = false
        self.answeredEarly.removeAll { streamID in
            if session.isHalfClosedLocal(streamID: streamID) {
                session.resetStream(streamID: streamID, errorCode: .noError)
                reset = true
                return true
            }
            return !session.isOpen(streamID: streamID)
        }
        return reset
    }

    func scheduleFlush() {
        guard !self.inRead, !self.flushScheduled, let context = self.context else { return }
        self.flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            self.flushScheduled = false
            self.flushOutput()
        }
    }

    /// Submits a whole response: headers that end the stream, or headers and one body.
    func submit(streamID: Int32, headers: [HTTP2Header], body: ByteBuffer?) {
        guard let session = self.session else { return }
        do {
            try session.submitResponse(streamID: streamID, headers: headers, endStream: body == nil)
            if let body {
                session.sendData(streamID: streamID, body)
                session.finish(streamID: streamID, trailers: nil)
            }
        } catch {
            session.resetStream(streamID: streamID, errorCode: .internalError)
        }
    }

    func respondTrailersOnly(streamID: Int32, _ response: WireResponse = CallOpening.grpcResponse, _ error: RPCError) {
        // Refused before a call exists: reset after the answer if the request is still open (see resetAnsweredEarly).
        self.answeredEarly.append(streamID)
        let allocator = self.context?.channel.allocator ?? ByteBufferAllocator()
        let whole = response.complete(error, metadata: [:], trailers: [:], message: nil, allocator: allocator)
        self.submit(streamID: streamID, headers: whole.headers, body: whole.body)
        self.scheduleFlush()
    }

    /// Answers with headers alone (a CORS preflight).
    func respondHeadersOnly(streamID: Int32, _ headers: [HTTP2Header]) {
        self.answeredEarly.append(streamID)
        self.submit(streamID: streamID, headers: headers, body: nil)
        self.scheduleFlush()
    }

    func respondHTTPError(streamID: Int32, status: String, code: StatusCode, _ message: String) {
        guard let session = self.session else { return }
        // Refused before a call exists: reset after the answer if the request is still open (see resetAnsweredEarly).
        self.answeredEarly.append(streamID)
        let headers = [
            HTTP2Header(":status", status), HTTP2Header("grpc-status", String(code.rawValue)),
            HTTP2Header("grpc-message", PercentEncoding.encode(message)),
        ]
        do {
            try session.submitResponse(streamID: streamID, headers: headers, endStream: true)
        } catch {
            session.resetStream(streamID: streamID, errorCode: .internalError)
        }
        self.scheduleFlush()
    }
}
