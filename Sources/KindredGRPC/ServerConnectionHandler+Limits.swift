import KindredHTTP2
import Logging
import NIOCore

/// Acting on the limits' decisions (`ServerConnectionLimits`): an exhausted abuse budget closes the connection
/// and penalises its address, slow request bodies fail their calls, and writers and handlers waiting for the
/// connection's output go on once it has drained.
extension ServerConnectionHandler {
    /// Charges an event to the connection's abuse budget; an exhausted budget closes the connection.
    func charge(_ event: HTTP2PeerEvent) {
        guard self.lifecycle.phase != .closed else { return }
        self.logger.trace("HTTP/2 glitch", metadata: ["event": "\(event)", "net.peer": "\(self.peer)"])
        switch self.limits.charge(event, now: .now()) {
        case .withinBudget: break
        case .closeForAbuse: self.closeForAbuse(reason: "too_many_glitches")
        }
    }

    /// GOAWAY ENHANCE_YOUR_CALM, the peer's address penalised, and the connection closed: at once, or at the
    /// end of the current read (nghttp2 is still parsing it) where `channelRead` sees the phase `.closed`.
    func closeForAbuse(reason: String) {
        guard let session = self.session, self.lifecycle.closeForAbuse() else { return }
        self.recordAbuse(reason: reason)
        session.goAway(errorCode: .enhanceYourCalm, debugData: reason)
        if !self.inRead {
            self.flushOutput()
            self.closeConnection()
        }
    }

    func recordAbuse(reason: String) {
        self.metrics.connectionAbusive(reason: reason)
        var metadata: Logger.Metadata = ["reason": "\(reason)", "net.peer": "\(self.peer)"]
        if let penalties = self.penalties, let host = self.peerHost {
            metadata["penalty_s"] = "\(penalties.recordAbuse(from: host).components.seconds)"
        }
        self.logger.notice("Closing abusive connection", metadata: metadata)
    }

    func timedOut(_ kind: ServerMetrics.Timeout) {
        self.metrics.timedOut(kind)
        self.logger.debug("Connection or stream timed out", metadata: ["timeout": "\(kind)", "net.peer": "\(self.peer)"])
    }

    /// Makes sure the body timer fires by `deadline` (one timer per connection, at the earliest deadline).
    func watchBody(_ call: ServerCall, deadline: NIODeadline) {
        call.bodyDeadline = deadline
        guard let context = self.context, self.limits.watchBody(until: deadline) else { return }
        self.bodyTimer?.cancel()
        self.bodyTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.bodyTimer = nil
            self.limits.bodyTimerFired()
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

    /// Once the connection's queued output is down to half its watermark (or a stream holding it closed),
    /// the writers waiting on it go on (each still subject to its own stream's watermark).
    func resumeConnectionBlockedWriters() {
        guard let session = self.session else { return }
        for streamID in self.limits.takeConnectionBlockedWriters(connectionQueued: session.pendingOutboundBytes) {
            guard let call = self.calls[streamID], let writer = call.writerWaiting else { continue }
            if self.limits.streamHasRoom(streamQueued: session.pendingOutboundBytes(streamID: streamID)) {
                call.writerWaiting = nil
                writer.resume()
            }
        }
    }

    /// Once the connection's output has drained to half its cap, the handlers waiting to start ask again,
    /// oldest first (their tasks run in that order, so each one counts the output of those started before it).
    func wakeWaitingHandlers() {
        guard let session = self.session else { return }
        for streamID in self.limits.handlersToWake(connectionQueued: session.pendingOutboundBytes) {
            guard let call = self.calls[streamID], let waiting = call.admissionWaiting else { continue }
            call.admissionWaiting = nil
            waiting.resume(returning: false)
        }
    }
}
