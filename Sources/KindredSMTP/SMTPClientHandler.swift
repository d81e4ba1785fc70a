import KindredOpenSSL
import Logging
import NIOCore

/// Drives one SMTP session: splits received bytes into replies, feeds them to the
/// ``SMTPStateMachine``, performs its actions (writes, STARTTLS, close) and arms the per-command
/// timeout. Completes `outcomes` with one result per message when the session ends.
final class SMTPClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var machine: SMTPStateMachine
    private var parser = SMTPReplyParser()
    private let messages: [EncodedMessage]
    /// For STARTTLS; nil unless the security is `.startTLS`.
    private let tlsContext: TLSContext?
    private let serverName: String
    private let commandTimeout: TimeAmount
    private let logger: Logger
    private let outcomes: EventLoopPromise<[Result<Void, SMTPError>]>
    private var completed = false
    private var timeout: Scheduled<Void>?

    init(
        settings: SMTPStateMachine.Settings,
        messages: [EncodedMessage],
        tlsContext: TLSContext?,
        serverName: String,
        commandTimeout: TimeAmount,
        logger: Logger,
        outcomes: EventLoopPromise<[Result<Void, SMTPError>]>
    ) {
        self.machine = SMTPStateMachine(settings: settings, messages: messages)
        self.messages = messages
        self.tlsContext = tlsContext
        self.serverName = serverName
        self.commandTimeout = commandTimeout
        self.logger = logger
        self.outcomes = outcomes
    }

    // MARK: Events

    func channelActive(context: ChannelHandlerContext) {
        self.logger.debug("SMTP connected")
        // The greeting (after the handshake, with implicit TLS) is awaited like any reply.
        self.armTimeout(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.parser.append(self.unwrapInboundIn(data))
        do throws(SMTPError) {
            while !self.machine.isFinished, let reply = try self.parser.next() {
                self.logger.debug(
                    "SMTP reply",
                    metadata: ["smtp.reply.code": "\(reply.code)", "smtp.awaiting": "\(self.machine.awaitedVerb)"]
                )
                let action = self.machine.replyReceived(reply)
                if action == .startTLS, self.parser.hasBufferedInput {
                    // Plain-text bytes after the 220 would be taken as replies from inside TLS
                    // (response injection, as in CVE-2011-1575 and its client-side relatives).
                    let error = SMTPError(code: .tlsFailed, message: "server sent data after accepting STARTTLS")
                    self.perform(self.machine.connectionFailed(error), context: context)
                    return
                }
                self.perform(action, context: context)
            }
        } catch {
            self.perform(self.machine.connectionFailed(error), context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let handshake = event as? TLSHandshakeCompleted {
            self.logger.debug("SMTP TLS established", metadata: ["smtp.tls.version": "\(handshake.protocolVersion)"])
            self.perform(self.machine.tlsEstablished(), context: context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        let failure: SMTPError
        if let error = error as? OpenSSLError {
            failure = SMTPError(code: .tlsFailed, message: "TLS failed", detail: "\(error)")
        } else {
            failure = SMTPError(code: .connectionFailed, message: "connection failed", detail: "\(error)")
        }
        self.perform(self.machine.connectionFailed(failure), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let error = SMTPError(code: .connectionFailed, message: "connection closed before the session ended")
        self.perform(self.machine.connectionFailed(error), context: context)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timeout?.cancel()
        self.complete()
    }

    // MARK: Actions

    private func perform(_ action: SMTPStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .send(let command):
            self.logger.debug("SMTP command", metadata: ["smtp.command": "\(command.verb)"])
            context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: command.line)), promise: nil)
            self.armTimeout(context: context)
        case .sendContent(let index):
            let payload = self.messages[index].dataPayload
            self.logger.debug(
                "SMTP content",
                metadata: ["smtp.message_id": "\(self.messages[index].messageID)", "smtp.bytes": "\(payload.count)"]
            )
            var buffer = context.channel.allocator.buffer(capacity: payload.count)
            buffer.writeBytes(payload)
            context.writeAndFlush(self.wrapOutboundOut(buffer), promise: nil)
            self.armTimeout(context: context)
        case .startTLS:
            self.startTLS(context: context)
        case .wait:
            break
        case .close:
            self.timeout?.cancel()
            self.timeout = nil
            self.complete()
            context.close(promise: nil)
        }
    }

    private func startTLS(context: ChannelHandlerContext) {
        do {
            guard let tlsContext = self.tlsContext else {
                preconditionFailure("STARTTLS without a TLS context")
            }
            let handler = try TLSHandler(context: tlsContext, serverName: self.serverName)
            try context.pipeline.syncOperations.addHandler(handler, position: .first)
            self.armTimeout(context: context)
        } catch {
            let failure = SMTPError(code: .tlsFailed, message: "cannot start TLS", detail: "\(error)")
            self.perform(self.machine.connectionFailed(failure), context: context)
        }
    }

    private func armTimeout(context: ChannelHandlerContext) {
        self.timeout?.cancel()
        self.timeout = context.eventLoop.assumeIsolated().scheduleTask(in: self.commandTimeout) {
            self.logger.debug("SMTP timeout", metadata: ["smtp.awaiting": "\(self.machine.awaitedVerb)"])
            let error = SMTPError(code: .timeout, message: "no reply within the command timeout")
            self.perform(self.machine.connectionFailed(error), context: context)
        }
    }

    private func complete() {
        guard !self.completed else { return }
        self.completed = true
        let results = self.machine.outcomes.map {
            $0 ?? .failure(SMTPError(code: .connectionFailed, message: "connection closed before the session ended"))
        }
        for (message, result) in zip(self.messages, results) {
            switch result {
            case .success:
                self.logger.debug("SMTP message accepted", metadata: ["smtp.message_id": "\(message.messageID)"])
            case .failure(let error):
                var metadata: Logger.Metadata = [
                    "smtp.message_id": "\(message.messageID)", "smtp.error.code": "\(error.code)",
                ]
                if let code = error.replyCode { metadata["smtp.reply.code"] = "\(code)" }
                self.logger.debug("SMTP message not sent", metadata: metadata)
            }
        }
        self.outcomes.succeed(results)
    }
}

@available(*, unavailable)
extension SMTPClientHandler: Sendable {}
