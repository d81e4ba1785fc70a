import KindredHTTP2
import NIOCore

/// The nghttp2 session's events: a stream's headers open a call, its DATA feeds the call's reader, its end and
/// its close end the request and the stream; PINGs, SETTINGS and GOAWAY go to the lifecycle, frames that cost
/// work without carrying any to the abuse limits.
extension ServerConnectionHandler: HTTP2SessionDelegate {
    func http2Session(_ session: HTTP2Session, didReceiveHeaders headers: [HTTP2Header], streamID: Int32, endStream: Bool) {
        if let call = self.calls[streamID] {
            // Clients send no trailers in gRPC; treat a second header block as the end of the request.
            if endStream { self.http2Session(session, didReceiveEndStream: call.streamID) }
            return
        }
        if let action = self.lifecycle.requestReceived() { self.perform(action) }
        self.openCall(streamID: streamID, headers: headers, endStream: endStream)
    }

    private func openCall(streamID: Int32, headers: [HTTP2Header], endStream: Bool) {
        guard let session = self.session, let context = self.context else { return }
        guard self.lifecycle.acceptsCalls, self.lifecycle.openCalls < Int(self.configuration.http2.maxConcurrentStreams)
        else {
            // Closed, or handlers that outlived their streams hold every slot.
            session.resetStream(streamID: streamID, errorCode: .refusedStream)
            self.charge(.streamRefused)
            return
        }
        let handler: MethodHandler
        let path: String
        let response: WireResponse
        let deadline: NIODeadline?
        let urlMessage: [UInt8]?
        switch CallOpening.decide(headers, router: self.router, configuration: self.configuration, http1: false) {
        case .call(let found, let foundPath, let wireResponse, let foundDeadline, let message):
            (handler, path, response, deadline, urlMessage) = (found, foundPath, wireResponse, foundDeadline, message)
        case .preflight(let answer):
            self.respondHeadersOnly(streamID: streamID, answer)
            return
        case .http(let status, let message):
            self.respondHTTPError(streamID: streamID, status: status, code: GRPCHTTPStatus.code(status), message)
            return
        case .refuse(let wireResponse, let error, let unknownMethod):
            if unknownMethod { self.metrics.callFinished(path: "unknown", code: error.code, start: nil) }
            self.respondTrailersOnly(streamID: streamID, wireResponse, error)
            return
        }
        let call = ServerCall(
            streamID: streamID,
            path: path,
            requestHeaders: headers,
            deadline: deadline,
            response: response,
            peer: self.peer,
            eventLoop: context.eventLoop,
            handler: handler,
            connection: self,
            metrics: self.metrics,
            maxMessageSize: self.configuration.maxReceiveMessageSize,
            callerTrace: self.configuration.callerTrace
        )
        self.calls[streamID] = call
        if let action = self.lifecycle.callOpened() { self.perform(action) }
        let now = NIODeadline.now()
        call.opened(now: now)
        if !endStream && handler.singleRequest, let timeout = self.configuration.requestBodyTimeout {
            self.watchBody(call, deadline: now + TimeAmount(timeout))
        }
        if !handler.singleRequest {
            self.startHandler(call, firstMessage: nil)
        }
        if let urlMessage {
            // A Connect GET's message is in its URL: it is the body.
            let failure = urlMessage.withUnsafeBytes { raw -> InboundMessages.ReceiveFailure? in
                do throws(InboundMessages.ReceiveFailure) {
                    _ = try call.inbound.receive(raw, allocator: context.channel.allocator)
                    return nil
                } catch {
                    return error
                }
            }
            if let failure {
                self.finish(call, error: failure.rpcError)
                self.cancel(call)
                return
            }
        }
        if endStream {
            self.http2Session(session, didReceiveEndStream: streamID)
        }
    }

    func http2Session(_ session: HTTP2Session, didReceiveData bytes: UnsafeRawBufferPointer, streamID: Int32) {
        // DATA does not reset the PING strikes: a peer interleaving PINGs with a byte of DATA is still flooding.
        guard let call = self.calls[streamID], !call.state.isFinished, let context = self.context else {
            session.consume(streamID: streamID, count: bytes.count)
            return
        }
        do {
            // Bytes of a message still incomplete go back to the window now (the message is bounded by the receive
            // limit); bytes of complete messages only when the handler takes them.
            session.consume(streamID: streamID, count: try call.inbound.receive(bytes, allocator: context.channel.allocator))
        } catch {
            session.consume(streamID: streamID, count: error.release)
            self.finish(call, error: error.rpcError)
            self.cancel(call)
            return
        }
        if !call.handler.singleRequest, let timeout = self.configuration.requestBodyTimeout {
            // One message of a streaming request must arrive within the body timeout, from its first byte.
            if !call.inbound.hasPartialMessage {
                call.bodyDeadline = nil
            } else if call.bodyDeadline == nil {
                self.watchBody(call, deadline: .now() + TimeAmount(timeout))
            }
        }
        self.deliver(call)
    }

    func http2Session(_ session: HTTP2Session, didReceiveEndStream streamID: Int32) {
        guard let call = self.calls[streamID], call.state.requestEnd() else { return }
        call.bodyDeadline = nil
        if call.state.isFinished { return }
        if !call.wire.isFramed { call.inbound.endOfUnframedBody(allocator: call.allocator) }
        if call.inbound.hasPartialMessage {
            self.finish(call, error: RPCError(.internalError, "The request ended inside a message"))
            self.cancel(call)
            return
        }
        if call.handler.singleRequest && call.state.handler == .notStarted {
            guard call.inbound.count == 1 else {
                let message = call.inbound.isEmpty ? "The request has no message" : "Too many request messages"
                self.finish(call, error: RPCError(.internalError, message))
                return
            }
            let (message, held) = call.inbound.removeFirst()
            self.release(call, count: held)
            self.startHandler(call, firstMessage: message)
            return
        }
        self.deliver(call)
    }

    func http2Session(_ session: HTTP2Session, streamClosed streamID: Int32, errorCode: HTTP2ErrorCode) {
        // A call that ended without being cancelled must not stay first in line.
        self.limits.streamClosed(streamID)
        if !self.limits.connectionBlockedWriters.isEmpty { self.resumeConnectionBlockedWriters() }
        self.wakeWaitingHandlers()
        guard let call = self.calls.removeValue(forKey: streamID) else { return }
        let closed = call.state.streamClosed()
        // The client reset the stream (or the connection is going): cancel the handler.
        if closed.cancel { self.cancel(call) }
        if closed.releaseConnection { self.callEnded(call) }
    }

    func http2Session(_ session: HTTP2Session, didReceivePing ack: Bool, payload: UInt64) {
        if ack {
            self.perform(self.lifecycle.receivedPingAck(payload))
        } else if self.lifecycle.receivedPing(now: .now()) {
            self.closeForAbuse(reason: "too_many_pings")
        }
    }

    func http2Session(_ session: HTTP2Session, observed event: HTTP2PeerEvent, streamID: Int32) {
        if event == .settings && !self.lifecycle.handshakeComplete {
            // The client's first SETTINGS completes the handshake; later ones are charged.
            if let action = self.lifecycle.receivedSettings() { self.perform(action) }
            return
        }
        // grpcio sends small stream updates as a call starts and as it reads: a few per call are free.
        let call = event == .smallWindowUpdate && streamID != 0 ? self.calls[streamID] : nil
        switch self.limits.peerEvent(event, streamSmallWindowUpdates: call?.smallWindowUpdates) {
        case .freeForStream: call?.smallWindowUpdates += 1
        case .free: break
        case .charge: self.charge(event)
        }
    }

    func http2Session(_ session: HTTP2Session, didReceiveGoAway lastStreamID: Int32, errorCode: HTTP2ErrorCode) {
        self.perform(self.lifecycle.receivedGoAway())
    }

    func http2Session(_ session: HTTP2Session, didSendData count: Int, streamID: Int32, pendingBytes: Int) {
        self.lifecycle.sentData()
        self.limits.sentData()
        if !self.limits.connectionBlockedWriters.isEmpty {
            self.resumeConnectionBlockedWriters()
        }
        self.wakeWaitingHandlers()
        // A drained stream's writer goes on, unless the connection is still over its watermark: then it waits
        // for the connection.
        guard self.limits.streamDrained(streamQueued: pendingBytes),
            let call = self.calls[streamID], let writer = call.writerWaiting,
            self.limits.writerMayResume(streamID, connectionQueued: session.pendingOutboundBytes)
        else { return }
        call.writerWaiting = nil
        writer.resume()
    }
}
