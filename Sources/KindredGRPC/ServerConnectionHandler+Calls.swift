import KindredHTTP2
import Logging
import NIOCore

/// The call lifecycle as its handler sees it (`ServerCallConnection`): admission, start, read, wait for room,
/// send, finish (with its metrics and access log), and the ends a handler does not choose (deadline, cancellation).
extension ServerConnectionHandler: ServerCallConnection {
    /// Whether the handler of `call` may start at once; called on the loop by the call's task before it
    /// suspends. False: the call is queued and asks again through `askAdmission`.
    func admitNow(_ call: ServerCall) -> Bool {
        guard !call.state.isCancelled, let session = self.session else { return false }
        return self.limits.handlerMayStart(call.streamID, connectionQueued: session.pendingOutboundBytes)
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

    func startHandler(_ call: ServerCall, firstMessage: ByteBuffer?) {
        guard let executor = self.executor else { return }
        call.start(firstMessage: firstMessage, executor: executor, logger: self.logger)
    }

    /// Called on the loop when the handler's task has returned.
    func handlerFinished(_ call: ServerCall) {
        if call.state.handlerReturned() { self.callEnded(call) }
    }

    func deliver(_ call: ServerCall) {
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
    func release(_ call: ServerCall, count: Int) {
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
        switch self.limits.writer(call.streamID, streamQueued: pending, connectionQueued: connectionPending) {
        case .write: continuation.resume()
        case .waitForStream, .waitForConnection: call.writerWaiting = continuation
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
        let send = call.finishing(error, accessLogLevel: self.configuration.accessLogLevel, logger: self.logger)
        guard let session = self.session, send != .alreadyFinished, send != .record else { return }
        if !call.state.requestEnded { self.answeredEarly.append(call.streamID) }
        if send == .sendTrailers {
            let end = call.responseEnd(error)
            if let data = end.data { session.sendData(streamID: call.streamID, data) }
            session.finish(streamID: call.streamID, trailers: end.trailers)
        } else {
            let whole = call.wholeResponse(error)
            self.submit(streamID: call.streamID, headers: whole.headers, body: whole.body)
        }
        self.scheduleFlush()
    }

    func deadlineExceeded(_ call: ServerCall) {
        guard !call.state.isFinished else { return }
        self.finish(call, error: RPCError(.deadlineExceeded, "Deadline exceeded"))
        self.cancel(call)
        // The client gets its status; stop it sending more.
        if !call.state.requestEnded { self.session?.resetStream(streamID: call.streamID, errorCode: .cancel) }
        self.scheduleFlush()
    }

    /// Stops the call's handler and drops what it has not read; a call without status ends CANCELLED.
    func cancel(_ call: ServerCall) {
        guard let held = call.cancelling() else { return }
        self.limits.callCancelled(call.streamID)
        if held > 0 { self.session?.consume(streamID: call.streamID, count: held) }
    }

    /// The call's stream and handler are both gone.
    func callEnded(_ call: ServerCall) {
        call.connection = nil
        if let action = self.lifecycle.callClosed() { self.perform(action) }
    }
}
