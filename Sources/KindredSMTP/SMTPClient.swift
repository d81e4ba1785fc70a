import KindredOpenSSL
import Logging
import NIOCore
import NIOPosix

/// Sends mail to one SMTP relay, one connection per call.
///
/// ```swift
/// let client = try SMTPClient(configuration: configuration, logger: logger)
/// do {
///     try await client.send(message)
/// } catch let error as SMTPError where error.isTransient {
///     // retry later
/// }
/// ```
///
/// Messages are validated and rendered before connecting. Logs (debug level) carry `smtp.host`,
/// `smtp.port`, `smtp.command`, `smtp.reply.code` and `smtp.message_id`; never addresses,
/// content or credentials.
public struct SMTPClient: Sendable {
    public let configuration: SMTPConfiguration
    private let tlsContext: TLSContext?
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger

    /// - Throws: ``SMTPError`` (permanent) when the configuration cannot work: the trust roots
    ///   file is unusable, or credentials would be sent without TLS (security `.none` without
    ///   `allowInsecureAuth`).
    public init(
        configuration: SMTPConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) throws(SMTPError) {
        if configuration.credentials != nil, configuration.security == .none, !configuration.allowInsecureAuth {
            throw SMTPError.permanent(
                .authenticationFailed,
                "credentials need TLS: use STARTTLS or implicit TLS, or allowInsecureAuth for local tests"
            )
        }
        if configuration.security == .none {
            self.tlsContext = nil
        } else {
            var tls = TLSConfiguration.client(
                trustRoots: configuration.trustRoots,
                serverName: configuration.host,
                applicationProtocols: []
            )
            tls.verifiesHostname = true
            do {
                self.tlsContext = try TLSContext(configuration: tls)
            } catch {
                throw SMTPError.permanent(.tlsFailed, "cannot set up TLS", detail: "\(error)")
            }
        }
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup
        var logger = logger
        logger[metadataKey: "smtp.host"] = "\(configuration.host)"
        logger[metadataKey: "smtp.port"] = "\(configuration.port)"
        self.logger = logger
    }

    /// Sends one message.
    /// - Throws: ``SMTPError``; ``SMTPError/Code/invalidMessage`` before connecting. Throws
    ///   `CancellationError` if the task is cancelled before the server accepted the message.
    public func send(_ message: SMTPMessage) async throws {
        let encoded = try message.encoded()
        let result = await self.deliver([encoded])[0]
        if case .failure(let error) = result {
            try Task.checkCancellation()
            throw error
        }
    }

    /// Sends several messages over one connection, in order. A message that is refused does not
    /// stop the others (the transaction is reset); a connection failure fails the rest.
    /// - Returns: one result per message, in order.
    public func send(_ messages: [SMTPMessage]) async -> [Result<Void, SMTPError>] {
        var results = [Result<Void, SMTPError>?](repeating: nil, count: messages.count)
        var encoded: [EncodedMessage] = []
        var positions: [Int] = []
        for (index, message) in messages.enumerated() {
            do throws(SMTPError) {
                encoded.append(try message.encoded())
                positions.append(index)
            } catch {
                results[index] = .failure(error)
            }
        }
        if !encoded.isEmpty {
            for (position, result) in zip(positions, await self.deliver(encoded)) {
                results[position] = result
            }
        }
        return results.map { $0! }
    }

    /// Runs one session for `messages` (at least one).
    private func deliver(_ messages: [EncodedMessage]) async -> [Result<Void, SMTPError>] {
        let eventLoop = self.eventLoopGroup.next()
        let outcomes = eventLoop.makePromise(of: [Result<Void, SMTPError>].self)
        let configuration = self.configuration
        let settings = SMTPStateMachine.Settings(configuration)
        let tlsContext = self.tlsContext
        let logger = self.logger
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if configuration.security == .implicitTLS, let tlsContext {
                        try pipeline.addHandler(TLSHandler(context: tlsContext, serverName: configuration.host))
                    }
                    try pipeline.addHandler(
                        SMTPClientHandler(
                            settings: settings,
                            messages: messages,
                            tlsContext: configuration.security == .implicitTLS ? nil : tlsContext,
                            serverName: configuration.host,
                            commandTimeout: TimeAmount(configuration.commandTimeout),
                            logger: logger,
                            outcomes: outcomes
                        )
                    )
                }
            }

        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: configuration.host, port: configuration.port).get()
        } catch {
            logger.debug("SMTP connect failed", metadata: ["smtp.error": "\(error)"])
            let failure = SMTPError(code: .connectionFailed, message: "cannot connect", detail: "\(error)")
            let results = [Result<Void, SMTPError>](repeating: .failure(failure), count: messages.count)
            // A promise must not be dropped unfulfilled; if the handler completed it, this is a no-op.
            outcomes.succeed(results)
            return results
        }
        return await withTaskCancellationHandler {
            do {
                return try await outcomes.futureResult.get()
            } catch {
                // Not reached: the handler only ever succeeds the promise.
                let failure = SMTPError(code: .connectionFailed, message: "session ended", detail: "\(error)")
                return Array(repeating: .failure(failure), count: messages.count)
            }
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}
