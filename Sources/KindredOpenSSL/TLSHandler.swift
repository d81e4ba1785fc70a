import NIOCore

/// Fired inbound (`userInboundEventTriggered`) by ``TLSHandler`` once the handshake has completed,
/// before any decrypted data.
public struct TLSHandshakeCompleted: Sendable, Hashable {
    /// The ALPN protocol agreed on, e.g. "h2"; nil if the client offered none.
    public var negotiatedProtocol: String?
    /// "TLSv1.2" or "TLSv1.3".
    public var protocolVersion: String
    /// The peer certificate's subject (RFC 2253), if the peer sent a certificate.
    public var peerCertificateSubject: String?
    /// Whether the peer sent a certificate that verified against the trust roots (for a server:
    /// a verified client certificate under mutual TLS).
    public var peerCertificateVerified: Bool

    public init(
        negotiatedProtocol: String?,
        protocolVersion: String = "",
        peerCertificateSubject: String? = nil,
        peerCertificateVerified: Bool = false
    ) {
        self.negotiatedProtocol = negotiatedProtocol
        self.protocolVersion = protocolVersion
        self.peerCertificateSubject = peerCertificateSubject
        self.peerCertificateVerified = peerCertificateVerified
    }
}

/// TLS for one channel, with OpenSSL: ciphertext below, plaintext `ByteBuffer`s above.
///
/// Add it first in the pipeline (next to the socket). It starts the handshake when the channel
/// becomes active, holds writes until the handshake completes, then fires
/// ``TLSHandshakeCompleted``. Writes are encrypted on flush (small writes of one flush share TLS
/// records) and sent as one buffer. Decrypted data is fired in buffers of up to 16 KiB.
///
/// Closing sends close_notify, then closes once it is written (or after 3 seconds). A received
/// close_notify closes the channel, or fires `ChannelEvent.inputClosed` if remote half-closure is
/// allowed. Failures are fired as ``OpenSSLError`` through `errorCaught` (after sending OpenSSL's
/// alert), and the channel is closed.
///
/// Everything runs on the channel's event loop; the handler is not `Sendable`: add it with
/// `channel.pipeline.syncOperations.addHandler(_:)`.
public final class TLSHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private enum State {
        /// Added, channel not yet active.
        case idle
        case handshaking
        case active
        /// Closing was started (close, failure or close_notify received): a final close_notify or
        /// alert is on its way and the channel closes once it is written.
        case closing
        /// Inactive or removed.
        case closed
    }

    /// Size of the buffers decrypted data is read into: one maximal TLS record.
    private static let readChunkSize = 16384
    /// Writes up to this size are coalesced with neighbours of the same flush into one TLS record.
    private static let coalesceLimit = 16384
    private static let closeTimeout = TimeAmount.seconds(3)

    private let connection: SSLConnection
    private var state = State.idle
    private var pendingWrites = MarkedCircularBuffer<(ByteBuffer, EventLoopPromise<Void>?)>(initialCapacity: 4)
    private var upstreamReadPending = false
    private var firedReadInBatch = false
    /// Set once the peer's close_notify has been received under remote half-closure.
    private var inputClosed = false
    /// Set once our close_notify has been sent by a half-close (`close(mode: .output)`).
    private var outputClosed = false
    private var closeTimer: Scheduled<Void>?

    /// The handshake's outcome, once it has completed.
    public private(set) var handshakeResult: TLSHandshakeCompleted?

    /// The ALPN protocol agreed on, once the handshake has completed.
    public var negotiatedProtocol: String? { self.handshakeResult?.negotiatedProtocol }

    /// The peer certificate's subject (RFC 2253), once the handshake has completed.
    public var peerCertificateSubject: String? { self.handshakeResult?.peerCertificateSubject }

    /// - Parameters:
    ///   - context: the shared server or client context; it decides the role.
    ///   - serverName: clients only: the name for SNI and certificate verification, overriding
    ///     the configuration's `serverName` (a DNS name or an IP address literal).
    /// - Throws: ``OpenSSLError`` if the connection cannot be set up, e.g. a client that verifies
    ///   hostnames was given no server name.
    public init(context: TLSContext, serverName: String? = nil) throws {
        self.connection = try context.makeConnection(serverName: serverName)
    }

    // MARK: Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            self.startHandshake(context: context)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.state = .closed
        self.failPendingWrites(ChannelError.ioOnClosedChannel)
        self.closeTimer?.cancel()
    }

    public func channelActive(context: ChannelHandlerContext) {
        if self.state == .handshaking {
            // Started in handlerAdded (an accepted channel is active before it is registered):
            // ask again for the read that could not be issued then.
            context.read()
        } else {
            self.startHandshake(context: context)
        }
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        let wasHandshaking = self.state == .handshaking
        self.state = .closed
        self.closeTimer?.cancel()
        self.failPendingWrites(ChannelError.ioOnClosedChannel)
        if wasHandshaking {
            context.fireErrorCaught(
                OpenSSLError(code: .closedDuringHandshake, message: "connection closed during the TLS handshake")
            )
        }
        context.fireChannelInactive()
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard self.state == .idle else { return }
        self.state = .handshaking
        self.advanceHandshake(context: context)
        // The handshake needs reads even if the application has turned auto-read off.
        context.read()
    }

    private func advanceHandshake(context: ChannelHandlerContext) {
        switch self.connection.handshake() {
        case .wantRead:
            self.writeOutput(context: context, promise: nil)
        case .failed(let error):
            self.fail(context: context, error: error)
        case .complete:
            let result = TLSHandshakeCompleted(
                negotiatedProtocol: self.connection.negotiatedProtocol,
                protocolVersion: self.connection.protocolVersion,
                peerCertificateSubject: self.connection.peerCertificateSubject,
                peerCertificateVerified: self.connection.peerCertificateVerified
            )
            let offered = self.connection.context.configuration.applicationProtocols
            if self.connection.context.configuration.role == .client, !offered.isEmpty,
                result.negotiatedProtocol == nil
            {
                // The server ignored ALPN (it cannot pick something we did not offer: OpenSSL
                // rejects that itself).
                self.connection.shutdown()
                self.fail(
                    context: context,
                    error: OpenSSLError(
                        code: .applicationProtocolNotNegotiated,
                        message: "the server selected no ALPN protocol (offered: \(offered.joined(separator: ", ")))"
                    )
                )
                return
            }
            self.handshakeResult = result
            self.state = .active
            // Sends our last handshake flight together with any writes held during the handshake.
            self.encryptFlushedWrites(context: context)
            guard self.state == .active else { return }
            context.fireUserInboundEventTriggered(result)
        }
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.state {
        case .handshaking, .active:
            break
        case .idle, .closing, .closed:
            // Before activation nothing can arrive; after close_notify or failure input is dropped.
            return
        }
        guard !self.inputClosed else { return }
        if let error = self.connection.receive(self.unwrapInboundIn(data)) {
            self.fail(context: context, error: error)
            return
        }
        if self.state == .handshaking {
            self.advanceHandshake(context: context)
        }
        if self.state == .active, !self.inputClosed {
            self.readPlaintext(context: context)
        }
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        reading: while self.state == .active, self.connection.hasBufferedInput {
            var buffer = context.channel.allocator.buffer(capacity: Self.readChunkSize)
            let result = self.connection.read(into: &buffer)
            if buffer.readableBytes > 0 {
                self.firedReadInBatch = true
                self.upstreamReadPending = false
                // Upstream may write, flush or close from here: the loop re-checks the state.
                context.fireChannelRead(self.wrapInboundOut(buffer))
            }
            switch result {
            case .bufferFull:
                continue
            case .wantRead:
                break reading
            case .closeNotify:
                self.receivedCloseNotify(context: context)
                return
            case .failed(let error):
                self.fail(context: context, error: error)
                return
            }
        }
        // Reading can queue output: a TLS 1.3 KeyUpdate reply, or an alert.
        if self.state == .active {
            self.writeOutput(context: context, promise: nil)
        }
    }

    private func receivedCloseNotify(context: ChannelHandlerContext) {
        let halfClosureAllowed =
            (try? context.channel.syncOptions?.getOption(ChannelOptions.allowRemoteHalfClosure)) ?? false
        if halfClosureAllowed && !self.outputClosed {
            // Stay open for writing; further input is dropped by channelRead.
            self.inputClosed = true
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        } else {
            self.close(context: context, mode: .all, promise: nil)
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        let fired = self.firedReadInBatch
        self.firedReadInBatch = false
        if fired {
            context.fireChannelReadComplete()
        }
        // Ciphertext that yielded no plaintext (handshake, partial record) must not stall a
        // reader that asked for data with auto-read off.
        if self.state == .handshaking || (!fired && self.upstreamReadPending) {
            context.read()
        }
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, self.state == .handshaking {
            self.fail(
                context: context,
                error: OpenSSLError(code: .closedDuringHandshake, message: "peer closed during the TLS handshake")
            )
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Outbound

    public func read(context: ChannelHandlerContext) {
        self.upstreamReadPending = true
        context.read()
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.state {
        case .idle, .handshaking, .active:
            if self.outputClosed {
                promise?.fail(ChannelError.outputClosed)
            } else {
                self.pendingWrites.append((self.unwrapOutboundIn(data), promise))
            }
        case .closing, .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        guard !self.pendingWrites.isEmpty, !self.outputClosed else { return }
        self.pendingWrites.mark()
        if self.state == .active {
            self.encryptFlushedWrites(context: context)
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        switch (mode, self.state) {
        case (.input, _):
            context.close(mode: .input, promise: promise)
        case (.output, .active) where !self.outputClosed:
            // Half-close: close_notify ends our direction at the TLS layer, then TCP's FIN.
            self.connection.shutdown()
            self.outputClosed = true
            self.failPendingWrites(ChannelError.outputClosed)
            self.writeOutputThenClose(context: context, mode: .output, promise: promise)
        case (.all, .active):
            self.connection.shutdown()
            self.state = .closing
            self.failPendingWrites(ChannelError.ioOnClosedChannel)
            self.writeOutputThenClose(context: context, mode: .all, promise: promise)
        case (_, .closing):
            // Already closing, the final write on its way: complete with the channel's close.
            if let promise { context.channel.closeFuture.cascade(to: promise) }
        case (_, .idle), (_, .handshaking), (_, .active), (_, .closed):
            if mode == .all {
                self.state = .closed
                self.failPendingWrites(ChannelError.ioOnClosedChannel)
            }
            context.close(mode: mode, promise: promise)
        }
    }

    /// Encrypts the flushed writes, coalescing small ones, and sends the ciphertext as one buffer.
    private func encryptFlushedWrites(context: ChannelHandlerContext) {
        var promises: [EventLoopPromise<Void>] = []
        var small: ByteBuffer?  // a run of small writes, not yet encrypted
        var smallIsOwnRun = false  // whether `small` is our copy (else it is the caller's buffer)
        var failure: OpenSSLError?
        while self.pendingWrites.hasMark {
            var (buffer, promise) = self.pendingWrites.removeFirst()
            if let promise { promises.append(promise) }
            guard failure == nil, buffer.readableBytes > 0 else { continue }
            if buffer.readableBytes + (small?.readableBytes ?? 0) <= Self.coalesceLimit {
                if small == nil {
                    small = buffer  // no copy unless another small write follows
                    smallIsOwnRun = false
                } else {
                    // A second small write: gather into a buffer of our own, never into the
                    // caller's (which could copy-on-write its whole storage). Mutated in place.
                    if !smallIsOwnRun {
                        var own = context.channel.allocator.buffer(capacity: Self.coalesceLimit)
                        own.writeBuffer(&small!)
                        small = own
                        smallIsOwnRun = true
                    }
                    small!.writeBuffer(&buffer)
                }
                continue
            }
            if let run = small {
                failure = self.connection.send(run)
                small = nil
            }
            if failure == nil {
                if buffer.readableBytes < Self.coalesceLimit {
                    small = buffer
                    smallIsOwnRun = false
                } else {
                    failure = self.connection.send(buffer)
                }
            }
        }
        if failure == nil, let run = small {
            failure = self.connection.send(run)
        }

        let promise: EventLoopPromise<Void>?
        switch promises.count {
        case 0:
            promise = nil
        case 1:
            promise = promises[0]
        default:
            let combined = context.eventLoop.makePromise(of: Void.self)
            for each in promises { combined.futureResult.cascade(to: each) }
            promise = combined
        }
        if let failure {
            promise?.fail(failure)
            self.fail(context: context, error: failure)
        } else {
            self.writeOutput(context: context, promise: promise)
        }
    }

    // MARK: Helpers

    /// Writes and flushes the pending ciphertext, if any.
    private func writeOutput(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        if let output = self.connection.takeOutput(allocator: context.channel.allocator) {
            context.writeAndFlush(self.wrapOutboundOut(output), promise: promise)
        } else {
            promise?.succeed()
        }
    }

    /// Writes and flushes the pending ciphertext (close_notify or an alert), then closes once the
    /// write completes, or after ``closeTimeout`` if the peer stops reading.
    private func writeOutputThenClose(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?)
    {
        guard let output = self.connection.takeOutput(allocator: context.channel.allocator) else {
            context.close(mode: mode, promise: promise)
            return
        }
        var closed = false
        context.writeAndFlush(self.wrapOutboundOut(output)).assumeIsolated().whenComplete { _ in
            guard !closed else { return }
            closed = true
            self.closeTimer?.cancel()
            context.close(mode: mode, promise: promise)
        }
        guard !closed else { return }
        self.closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeTimeout) {
            guard !closed else { return }
            closed = true
            context.close(mode: .all, promise: promise)
        }
    }

    /// Reports `error`, then sends OpenSSL's alert (if any) and closes the channel.
    private func fail(context: ChannelHandlerContext, error: Error) {
        switch self.state {
        case .idle, .handshaking, .active:
            break
        case .closing, .closed:
            return
        }
        // From here, a close from an error handler waits for the alert instead of dropping it.
        self.state = .closing
        self.failPendingWrites(error)
        context.fireErrorCaught(error)
        self.writeOutputThenClose(context: context, mode: .all, promise: nil)
    }

    private func failPendingWrites(_ error: Error) {
        while let (_, promise) = self.pendingWrites.popFirst() {
            promise?.fail(error)
        }
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
