import KindredHTTP2
import KindredProtobuf
import Logging
import NIOCore

/// Serves gRPC on one connection: owns its nghttp2 session, maps streams to calls and runs their handlers.
/// Everything here runs on the channel's event loop.
final class ServerConnectionHandler: ChannelInboundHandler, HTTP2SessionDelegate, ServerCallConnection {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let router: GRPCRouter
    private let configuration: GRPCServerConfiguration
    private let logger: Logger
    private let metrics: ServerMetrics
    private let penalties: AbusePenalties?
    private var session: HTTP2Session?
    private var context: ChannelHandlerContext?
    private var executor: EventLoopTaskExecutor?
    private var calls: [Int32: ServerCall] = [:]
    /// Streams answered before their request ended, to reset with NO_ERROR once the answer is sent.
    private var answeredEarly: [Int32] = []
    /// The connection's lifecycle (handshake, idle, keepalive, PING strikes, two-phase shutdown); its timers
    /// are armed here, indexed by `ServerConnectionStateMachine.Timer`.
    private var lifecycle: ServerConnectionStateMachine
    private var timers = [Scheduled<Void>?](repeating: nil, count: ServerConnectionStateMachine.Timer.allCases.count)
    private var peer = "unknown"
    /// The peer's IP address (the key of the abuse penalty).
    private var peerHost: String?

    // Abuse limits (issue 16): frames that cost work without carrying any, the handshake, requests and bodies
    // that never finish, and a peer that does not read its output.
    private var abuseBudget: HTTP2AbuseBudget
    /// Small connection WINDOW_UPDATEs that are free: two per DATA frame we sent (a peer may answer each
    /// frame with an update of its size, however small). A +1 flood with nothing sent is charged.
    private var freeWindowUpdates = 0
    /// Streams whose writer waits for the connection's queued output to drain.
    private var connectionBlockedWriters: Set<Int32> = []
    /// Handlers that may not start yet because the connection's output is at its cap.
    private var admission: HandlerAdmission
    private var writeStallTimer: Scheduled<Void>?
    private var bodyTimer: Scheduled<Void>?
    private var bodyTimerDeadline: NIODeadline?

    /// Output batching, not lifecycle: nghttp2 is parsing a read (its end flushes), a flush is queued.
    private var inRead = false
    private var flushScheduled = false

    init(
        router: GRPCRouter,
        configuration: GRPCServerConfiguration,
        logger: Logger,
        metrics: ServerMetrics,
        penalties: AbusePenalties? = nil
    ) {
        self.router = router
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.penalties = penalties
        self.abuseBudget = HTTP2AbuseBudget(configuration: configuration.abuseBudget, now: .now())
        self.admission = HandlerAdmission(cap: configuration.connectionOutboundHighWatermark)
        self.lifecycle = ServerConnectionStateMachine(configuration: .init(configuration), now: .now())
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.executor = EventLoopTaskExecutor(context.eventLoop)
        if let address = context.channel.remoteAddress {
            self.peer = "\(address.ipAddress ?? "unix"):\(address.port ?? 0)"
            self.peerHost = address.ipAddress
        }
        do {
            let session = try HTTP2Session(role: .server, configuration: self.configuration.http2)
            session.delegate = self
            self.session = session
        } catch {
            self.logger.error("HTTP/2 session setup failed", metadata: ["error": "\(error)"])
            context.close(promise: nil)
            return
        }
        if context.channel.isActive { self.start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard self.session != nil, self.lifecycle.phase == .notStarted else { return }
        self.metrics.connectionOpened()
        self.flushOutput()
        self.perform(self.lifecycle.start(now: .now()))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = self.unwrapInboundIn(data)
        guard let session = self.session else { return }
        if let action = self.lifecycle.received(now: .now()) { self.perform(action) }
        self.inRead = true
        defer { self.inRead = false }
        do {
            try session.receive(bytes)
        } catch {
            // Bad preface, protocol violation or a flood nghttp2 detected: it has queued a GOAWAY.
            self.logger.debug("Closing connection after HTTP/2 error", metadata: ["error": "\(error)"])
            if error.isFlood, self.lifecycle.closeForAbuse() {
                self.recordAbuse(reason: "flood")
            } else {
                self.lifecycle.closeNow()
            }
            self.flushOutput()
            self.closeConnection()
            return
        }
        if self.lifecycle.phase == .closed {
            // The connection was closed during this read (abuse budget or PING strikes exhausted): GOAWAY is
            // queued, the rest of the input is not wanted.
            self.flushOutput()
            self.closeConnection()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // While the peer does not take our output, read nothing more from it: whatever it sends (PINGs,
        // SETTINGS, requests) would only queue more output. nghttp2's ACK limit and the per-stream watermark
        // then bound what waits inside the session.
        let writable = context.channel.isWritable
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: writable)
        if writable {
            self.writeStallTimer?.cancel()
            self.writeStallTimer = nil
            self.flushOutput()
        } else if self.writeStallTimer == nil, let timeout = self.configuration.writeStallTimeout {
            self.writeStallTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(timeout)) { [self] in
                self.writeStallTimer = nil
                guard let context = self.context, !context.channel.isWritable else { return }
                self.timedOut(.writeStall)
                self.lifecycle.closeNow()
                self.closeConnection()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushOutput()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.teardown()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.logger.debug("Connection error", metadata: ["error": "\(error)"])
        self.closeConnection()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let shutdown = event as? ServerShutdownEvent {
            self.perform(self.lifecycle.beginGracefulShutdown(grace: TimeAmount(shutdown.grace), now: .now()))
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func teardown() {
        guard self.session != nil else { return }
        if self.lifecycle.phase != .notStarted { self.metrics.connectionClosed() }
        self.perform(self.lifecycle.channelClosed())
        self.writeStallTimer?.cancel()
        self.bodyTimer?.cancel()
        let calls = self.calls
        self.calls.removeAll()
        for call in calls.values {
            _ = call.state.streamClosed()
            self.cancel(call)
            call.connection = nil
        }
        self.session?.delegate = nil
        self.session = nil
        self.context = nil
    }

    private func closeConnection() {
        guard let context = self.context else { return }
        context.close(promise: nil)
    }

    // MARK: Output

    /// Writes what nghttp2 has queued, while the channel is writable (see `outboundFlushLimit`). Called at the
    /// end of each read batch, when the channel becomes writable again and, for output produced by handlers,
    /// once per event-loop tick so responses finished together go out in one write.
    private func flushOutput() {
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

    private func scheduleFlush() {
        guard !self.inRead, !self.flushScheduled, let context = self.context else { return }
        self.flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            self.flushScheduled = false
            self.flushOutput()
        }
    }

    // MARK: HTTP/2 events

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
            maxMessageSize: self.configuration.maxReceiveMessageSize
        )
        self.calls[streamID] = call
        if let action = self.lifecycle.callOpened() { self.perform(action) }
        self.metrics.callStarted()
        let now = NIODeadline.now()
        call.startTime = now
        if !endStream && handler.singleRequest, let timeout = self.configuration.requestBodyTimeout {
            self.watchBody(call, deadline: now + TimeAmount(timeout))
        }
        if let deadline {
            call.deadlineTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
                self.deadlineExceeded(call)
            }
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
        self.connectionBlockedWriters.remove(streamID)
        if !self.connectionBlockedWriters.isEmpty { self.resumeConnectionBlockedWriters() }
        // A call that ended without being cancelled must not stay first in line.
        self.admission.remove(streamID)
        self.wakeWaitingHandlers()
        guard let call = self.calls.removeValue(forKey: streamID) else { return }
        let closed = call.state.streamClosed()
        // The client reset the stream (or the connection is going): cancel the handler.
        if closed.cancel { self.cancel(call) }
        if closed.releaseConnection { self.callEnded(call) }
    }

    /// The call's stream and handler are both gone.
    private func callEnded(_ call: ServerCall) {
        call.connection = nil
        if let action = self.lifecycle.callClosed() { self.perform(action) }
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
        if event == .smallWindowUpdate {
            // grpcio sends small stream updates as a call starts and as it reads: a few per call are free.
            if streamID != 0, let call = self.calls[streamID], call.smallWindowUpdates < 8 {
                call.smallWindowUpdates += 1
                return
            }
            if self.freeWindowUpdates > 0 {
                self.freeWindowUpdates -= 1
                return
            }
        }
        self.charge(event)
    }

    // MARK: Abuse

    /// Charges an event to the connection's abuse budget; an exhausted budget closes the connection.
    private func charge(_ event: HTTP2PeerEvent) {
        guard self.lifecycle.phase != .closed else { return }
        self.logger.trace("HTTP/2 glitch", metadata: ["event": "\(event)", "net.peer": "\(self.peer)"])
        if !self.abuseBudget.charge(event, now: .now()) {
            self.closeForAbuse(reason: "too_many_glitches")
        }
    }

    /// GOAWAY ENHANCE_YOUR_CALM, the peer's address penalised, and the connection closed: at once, or at the
    /// end of the current read (nghttp2 is still parsing it) where `channelRead` sees the phase `.closed`.
    private func closeForAbuse(reason: String) {
        guard let session = self.session, self.lifecycle.closeForAbuse() else { return }
        self.recordAbuse(reason: reason)
        session.goAway(errorCode: .enhanceYourCalm, debugData: reason)
        if !self.inRead {
            self.flushOutput()
            self.closeConnection()
        }
    }

    private func recordAbuse(reason: String) {
        self.metrics.connectionAbusive(reason: reason)
        var metadata: Logger.Metadata = ["reason": "\(reason)", "net.peer": "\(self.peer)"]
        if let penalties = self.penalties, let host = self.peerHost {
            metadata["penalty_s"] = "\(penalties.recordAbuse(from: host).components.seconds)"
        }
        self.logger.notice("Closing abusive connection", metadata: metadata)
    }

    private func timedOut(_ kind: ServerMetrics.Timeout) {
        self.metrics.timedOut(kind)
        self.logger.debug("Connection or stream timed out", metadata: ["timeout": "\(kind)", "net.peer": "\(self.peer)"])
    }

    /// Makes sure the body timer fires by `deadline` (one timer per connection, at the earliest deadline).
    private func watchBody(_ call: ServerCall, deadline: NIODeadline) {
        call.bodyDeadline = deadline
        if let scheduled = self.bodyTimerDeadline, scheduled <= deadline { return }
        guard let context = self.context else { return }
        self.bodyTimer?.cancel()
        self.bodyTimerDeadline = deadline
        self.bodyTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.bodyTimer = nil
            self.bodyTimerDeadline = nil
            self.checkBodyDeadlines()
        }
    }

    private func checkBodyDeadlines() {
        let now = NIODeadline.now()
        var next: (call: ServerCall, deadline: NIODeadline)?
        for call in self.calls.values {
            guard let deadline = call.bodyDeadline else { continue }
            if deadline <= now {
                call.bodyDeadline = nil
                self.timedOut(.requestBody)
                self.finish(call, error: RPCError(.resourceExhausted, "The request body arrived too slowly"))
                self.cancel(call)
                if !call.state.requestEnded { self.session?.resetStream(streamID: call.streamID, errorCode: .cancel) }
            } else if next == nil || deadline < next!.deadline {
                next = (call, deadline)
            }
        }
        if let next { self.watchBody(next.call, deadline: next.deadline) }
        self.scheduleFlush()
    }

    func http2Session(_ session: HTTP2Session, didReceiveGoAway lastStreamID: Int32, errorCode: HTTP2ErrorCode) {
        self.perform(self.lifecycle.receivedGoAway())
    }

    func http2Session(_ session: HTTP2Session, didSendData count: Int, streamID: Int32, pendingBytes: Int) {
        self.lifecycle.sentData()
        if self.freeWindowUpdates < 10_000 { self.freeWindowUpdates += 2 }
        if !self.connectionBlockedWriters.isEmpty {
            self.resumeConnectionBlockedWriters()
        }
        self.wakeWaitingHandlers()
        guard pendingBytes <= self.configuration.outboundHighWatermark / 2,
            let call = self.calls[streamID], let writer = call.writerWaiting
        else { return }
        if session.pendingOutboundBytes > self.configuration.connectionOutboundHighWatermark {
            // Its stream has room, the connection not yet.
            self.connectionBlockedWriters.insert(streamID)
            return
        }
        call.writerWaiting = nil
        self.connectionBlockedWriters.remove(streamID)
        writer.resume()
    }

    /// Once the connection's queued output is down to half its watermark (or a stream holding it closed),
    /// the writers waiting on it go on (each still subject to its own stream's watermark).
    private func resumeConnectionBlockedWriters() {
        guard let session = self.session,
            session.pendingOutboundBytes <= self.configuration.connectionOutboundHighWatermark / 2
        else { return }
        let waiting = self.connectionBlockedWriters
        self.connectionBlockedWriters.removeAll()
        for streamID in waiting {
            guard let call = self.calls[streamID], let writer = call.writerWaiting else { continue }
            if session.pendingOutboundBytes(streamID: streamID) <= self.configuration.outboundHighWatermark {
                call.writerWaiting = nil
                writer.resume()
            }
        }
    }

    /// Whether the handler of `call` may start at once; called on the loop by the call's task before it
    /// suspends. False: the call is queued and asks again through `askAdmission`.
    func admitNow(_ call: ServerCall) -> Bool {
        guard !call.state.isCancelled, let session = self.session else { return false }
        return self.admission.mayStart(call.streamID, queuedOutput: session.pendingOutboundBytes)
    }

    /// Called by a call's task before its handler runs: resumes it with true if the handler may start now,
    /// else keeps it waiting (in arrival order) until `wakeWaitingHandlers` asks it to ask again.
    func askAdmission(_ call: ServerCall, continuation: CheckedContinuation<Bool, any Error>) {
        guard !call.state.isCancelled, self.session != nil else {
            continuation.resume(throwing: CancellationError())
            return
        }
        if self.admitNow(call) {
            continuation.resume(returning: true)
        } else {
            call.admissionWaiting = continuation
        }
    }

    /// Once the connection's output has drained to half its cap, the handlers waiting to start ask again,
    /// oldest first (their tasks run in that order, so each one counts the output of those started before it).
    private func wakeWaitingHandlers() {
        guard let session = self.session, self.admission.shouldWake(queuedOutput: session.pendingOutboundBytes) else {
            return
        }
        for streamID in self.admission.waiting {
            guard let call = self.calls[streamID], let waiting = call.admissionWaiting else { continue }
            call.admissionWaiting = nil
            waiting.resume(returning: false)
        }
    }

    // MARK: Calls

    private func startHandler(_ call: ServerCall, firstMessage: ByteBuffer?) {
        guard let executor = self.executor else { return }
        call.start(firstMessage: firstMessage, executor: executor, logger: self.logger)
    }

    /// Called on the loop when the handler's task has returned.
    func handlerFinished(_ call: ServerCall) {
        if call.state.handlerReturned() { self.callEnded(call) }
    }

    private func deliver(_ call: ServerCall) {
        guard let reader = call.readerWaiting else { return }
        if !call.inbound.isEmpty {
            call.readerWaiting = nil
            let (message, held) = call.inbound.removeFirst()
            self.release(call, count: held)
            reader.resume(returning: message)
        } else if call.state.requestEnded {
            call.readerWaiting = nil
            reader.resume(returning: nil)
        }
    }

    /// Returns the window bytes a dequeued message held.
    private func release(_ call: ServerCall, count: Int) {
        guard count > 0 else { return }
        self.session?.consume(streamID: call.streamID, count: count)
        self.scheduleFlush()
    }

    func read(on call: ServerCall, continuation: CheckedContinuation<ByteBuffer?, any Error>) {
        if call.state.isCancelled {
            continuation.resume(throwing: CancellationError())
            return
        }
        precondition(call.readerWaiting == nil, "RequestStream iterated concurrently")
        call.readerWaiting = continuation
        self.deliver(call)
    }

    func waitUntilWritable(_ call: ServerCall, continuation: CheckedContinuation<Void, any Error>) {
        if call.state.isCancelled {
            continuation.resume(throwing: CancellationError())
            return
        }
        let pending = self.session?.pendingOutboundBytes(streamID: call.streamID) ?? 0
        let connectionPending = self.session?.pendingOutboundBytes ?? 0
        if pending <= self.configuration.outboundHighWatermark
            && connectionPending <= self.configuration.connectionOutboundHighWatermark
        {
            continuation.resume()
        } else {
            call.writerWaiting = continuation
            if connectionPending > self.configuration.connectionOutboundHighWatermark {
                self.connectionBlockedWriters.insert(call.streamID)
            }
        }
    }

    func sendMessage(_ framed: ByteBuffer, on call: ServerCall) {
        guard let session = self.session else { return }
        if !call.wire.isFramed {
            // Connect unary: the message goes out with the status (headers and trailers come first).
            if !call.state.isFinished { call.unaryResponse = framed }
            return
        }
        switch call.state.sendMessage() {
        case .drop: return
        case .sendHeadersAndMessage: self.sendHeaders(call)
        case .sendMessage: break
        }
        session.sendData(streamID: call.streamID, framed)
        self.scheduleFlush()
    }

    private func sendHeaders(_ call: ServerCall) {
        guard let session = self.session else { return }
        let headers = call.response.headers(metadata: call.responseMetadata)
        do {
            try session.submitResponse(streamID: call.streamID, headers: headers, endStream: false)
        } catch {
            self.logger.debug("Submitting response headers failed", metadata: ["error": "\(error)"])
            session.resetStream(streamID: call.streamID, errorCode: .internalError)
        }
    }

    /// Sends the call's status, once: trailers after headers, or a trailers-only response.
    func finish(_ call: ServerCall, error: RPCError?) {
        let send = call.state.finish()
        if send == .alreadyFinished { return }
        call.deadlineTimer?.cancel()
        call.deadlineTimer = nil
        self.metrics.callFinished(path: call.path, code: error?.code ?? .ok, start: call.startTime)
        if let level = self.configuration.accessLogLevel { call.logAccess(error: error, level: level, logger: self.logger) }
        guard let session = self.session, send != .record else { return }
        if !call.state.requestEnded { self.answeredEarly.append(call.streamID) }
        if send == .sendTrailers {
            let end = call.response.end(error, trailers: call.trailingMetadata, allocator: call.allocator)
            if let data = end.data { session.sendData(streamID: call.streamID, data) }
            session.finish(streamID: call.streamID, trailers: end.trailers)
        } else {
            let whole = call.response.complete(
                error,
                metadata: call.responseMetadata,
                trailers: call.trailingMetadata,
                message: call.unaryResponse,
                allocator: call.allocator
            )
            call.unaryResponse = nil
            self.submit(streamID: call.streamID, headers: whole.headers, body: whole.body)
        }
        self.scheduleFlush()
    }

    /// Submits a whole response: headers that end the stream, or headers and one body.
    private func submit(streamID: Int32, headers: [HTTP2Header], body: ByteBuffer?) {
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

    private func respondTrailersOnly(streamID: Int32, _ response: WireResponse = CallOpening.grpcResponse, _ error: RPCError) {
        // Refused before a call exists: reset after the answer if the request is still open (see resetAnsweredEarly).
        self.answeredEarly.append(streamID)
        let allocator = self.context?.channel.allocator ?? ByteBufferAllocator()
        let whole = response.complete(error, metadata: [:], trailers: [:], message: nil, allocator: allocator)
        self.submit(streamID: streamID, headers: whole.headers, body: whole.body)
        self.scheduleFlush()
    }

    /// Answers with headers alone (a CORS preflight).
    private func respondHeadersOnly(streamID: Int32, _ headers: [HTTP2Header]) {
        self.answeredEarly.append(streamID)
        self.submit(streamID: streamID, headers: headers, body: nil)
        self.scheduleFlush()
    }

    private func respondHTTPError(streamID: Int32, status: String, code: StatusCode, _ message: String) {
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

    private func deadlineExceeded(_ call: ServerCall) {
        call.deadlineTimer = nil
        guard !call.state.isFinished else { return }
        self.finish(call, error: RPCError(.deadlineExceeded, "Deadline exceeded"))
        self.cancel(call)
        // The client gets its status; stop it sending more.
        if !call.state.requestEnded { self.session?.resetStream(streamID: call.streamID, errorCode: .cancel) }
        self.scheduleFlush()
    }

    /// Stops the call's handler and drops what it has not read; a call without status ends CANCELLED.
    private func cancel(_ call: ServerCall) {
        switch call.state.cancel() {
        case .alreadyCancelled:
            return
        case .cancelUnfinished:
            call.deadlineTimer?.cancel()
            call.deadlineTimer = nil
            self.metrics.callFinished(path: call.path, code: .cancelled, start: call.startTime)
        case .cancel:
            break
        }
        self.admission.remove(call.streamID)
        call.task?.cancel()
        call.failWaiters(CancellationError())
        let held = call.inbound.removeAll()
        if held > 0 { self.session?.consume(streamID: call.streamID, count: held) }
    }

    // MARK: Connection lifetime

    /// Performs what the lifecycle state machine asked for.
    private func perform(_ actions: [ServerConnectionStateMachine.Action]) {
        for action in actions { self.perform(action) }
    }

    private func perform(_ action: ServerConnectionStateMachine.Action) {
        switch action {
        case .schedule(let timer, let delay):
            guard let context = self.context else { return }
            self.timers[timer.rawValue]?.cancel()
            self.timers[timer.rawValue] = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
                self.timers[timer.rawValue] = nil
                self.perform(self.lifecycle.timerFired(timer, now: .now()))
            }
        case .cancel(let timer):
            self.timers[timer.rawValue]?.cancel()
            self.timers[timer.rawValue] = nil
        case .sendShutdownNotice:
            self.logger.debug("Connection shutting down", metadata: ["net.peer": "\(self.peer)"])
            guard let session = self.session, let context = self.context else { return }
            session.shutdownNotice()
            // nghttp2 sends a PING (an urgent frame) ahead of a GOAWAY queued in the same tick, but the PING must
            // follow the GOAWAY: its ACK is the proof that the client has read the GOAWAY. So the GOAWAY goes out
            // now, writable or not (control frames precede DATA in nghttp2's queues, so 16 KiB hold it).
            var buffer = context.channel.allocator.buffer(capacity: 0)
            do {
                try session.write(into: &buffer, limit: 16 << 10)
            } catch {
                self.closeConnection()
                return
            }
            if buffer.readableBytes > 0 { context.writeAndFlush(NIOAny(buffer), promise: nil) }
        case .sendPing(let payload):
            self.session?.ping(payload)
            self.scheduleFlush()
        case .sendGoAway(let code, let debugData):
            self.session?.goAway(errorCode: code, debugData: debugData)
            self.scheduleFlush()
        case .failCalls:
            for call in self.calls.values where !call.state.isFinished {
                self.finish(call, error: RPCError(.unavailable, "The server is shutting down"))
                self.cancel(call)
            }
        case .timedOut(let kind):
            self.timedOut(kind)
        case .closeWhenDrained:
            self.scheduleFlush()
        case .close:
            // Inside a read nghttp2 is still parsing: `channelRead` closes at its end.
            guard !self.inRead else { return }
            self.flushOutput()
            self.closeConnection()
        }
    }
}

extension ServerConnectionStateMachine.Configuration {
    init(_ configuration: GRPCServerConfiguration) {
        let maxAge = configuration.maxConnectionAge.map { age in
            // Jitter of ±10% so connections made together do not all go away together.
            TimeAmount.nanoseconds(Int64(Double(TimeAmount(age).nanoseconds) * Double.random(in: 0.9...1.1)))
        }
        self.init(
            idleTimeout: configuration.idleTimeout.map(TimeAmount.init),
            firstRequestTimeout: configuration.firstRequestTimeout.map(TimeAmount.init),
            handshakeTimeout: configuration.handshakeTimeout.map(TimeAmount.init),
            maxAge: maxAge,
            maxAgeGrace: TimeAmount(configuration.maxConnectionAgeGrace),
            keepaliveTime: TimeAmount(configuration.keepaliveTime),
            keepaliveTimeout: TimeAmount(configuration.keepaliveTimeout),
            minPingInterval: TimeAmount(configuration.minPingInterval),
            permitPingWithoutCalls: configuration.permitPingWithoutCalls,
            maxPingStrikes: configuration.maxPingStrikes,
            shutdownPingTimeout: TimeAmount(configuration.shutdownPingTimeout)
        )
    }
}

/// Fired into every server channel to start a graceful shutdown.
struct ServerShutdownEvent: Sendable {
    let grace: Duration
}
