import NIOCore

/// Performs what the connection's lifecycle state machine (`ServerConnectionStateMachine`) asks for: timers,
/// PINGs, GOAWAYs, failing calls at shutdown, closing.
extension ServerConnectionHandler {
    /// Performs what the lifecycle state machine asked for.
    func perform(_ actions: [ServerConnectionStateMachine.Action]) {
        for action in actions { self.perform(action) }
    }

    func perform(_ action: ServerConnectionStateMachine.Action) {
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
        case .failCalls(let cause):
            for call in self.calls.values where !call.state.isFinished {
                self.finish(call, error: RPCError(.unavailable, cause.message))
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
