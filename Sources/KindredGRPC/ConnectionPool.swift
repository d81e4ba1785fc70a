import KindredOpenSSL
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The HTTP/2 connections of one client to one target, honouring each peer's SETTINGS_MAX_CONCURRENT_STREAMS.
///
/// `ClientPoolStateMachine` decides (see there): a call takes a free stream slot on a ready connection, else the
/// pool opens another connection (`connectionCount` to spread load, up to `maxConnectionCount` when all are
/// full), else the call waits for a slot until its deadline and then fails with RESOURCE_EXHAUSTED. Without this,
/// streams past the peer's limit queued invisibly inside nghttp2 and timed out (long-lived chat subscriptions
/// filled the gateway's connections), or were refused when sent before the peer's SETTINGS arrived. Reconnects
/// after a failed attempt wait an exponential backoff with jitter; calls fail fast with UNAVAILABLE meanwhile.
final class ConnectionPool: Sendable {
    typealias Machine = ClientPoolStateMachine<Connection, PendingCall>

    private let configuration: GRPCClientConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state: NIOLockedValueBox<(machine: Machine, nextID: Int)>
    /// Called when a connection attempt failed or a connection stopped taking calls (GOAWAY, closed): the
    /// replica balancer takes the replica out until a health check answers again.
    private let onTrouble: (@Sendable () -> Void)?

    struct Connection: Sendable {
        let channel: any Channel
        let handler: NIOLoopBound<ClientConnectionHandler>
    }

    /// A call waiting for a stream slot: resumed once, by the machine's actions or its deadline timer.
    final class PendingCall: Sendable {
        let continuation: CheckedContinuation<Machine.Lease, any Error>
        private let timer = NIOLockedValueBox<Scheduled<Void>?>(nil)

        init(_ continuation: CheckedContinuation<Machine.Lease, any Error>) {
            self.continuation = continuation
        }

        func setTimer(_ timer: Scheduled<Void>) {
            self.timer.withLockedValue { $0 = timer }
        }

        func resume(with result: Result<Machine.Lease, RPCError>) {
            self.timer.withLockedValue { $0?.cancel() }
            self.continuation.resume(with: result.mapError { $0 as any Error })
        }
    }

    init(
        configuration: GRPCClientConfiguration,
        group: any EventLoopGroup,
        logger: Logger,
        onTrouble: (@Sendable () -> Void)? = nil
    ) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.onTrouble = onTrouble
        let limits = Machine.Limits(
            preferredConnections: configuration.connectionCount,
            maxConnections: configuration.maxConnectionCount,
            maxWaiting: configuration.maxWaitingCalls
        )
        self.state = NIOLockedValueBox((Machine(limits: limits, authority: configuration.authority), 0))
    }

    /// Takes a stream slot and opens the call's stream there (see `open`).
    func startCall(path: String, metadata: Metadata, deadline: NIODeadline?) async throws -> ClientCall {
        let maxMessageSize = self.configuration.maxReceiveMessageSize
        return try await self.open(deadline: deadline) { loop in
            ClientCall(eventLoop: loop, maxMessageSize: maxMessageSize)
        } start: { handler, call in
            handler.start(call, path: path, metadata: metadata, deadline: deadline)
        }
    }

    /// Takes a stream slot and makes a unary call there: one hop to the connection's loop opens the stream and
    /// sends `request` (framed), one resumption returns the outcome. Task cancellation cancels the call.
    func unary(path: String, metadata: Metadata, deadline: NIODeadline?, request: ByteBuffer) async throws
        -> ClientCall.UnaryOutcome
    {
        for _ in 0..<3 {
            let lease = try await self.acquire(deadline: deadline)
            let loop = lease.connection.channel.eventLoop
            let call = ClientCall(eventLoop: loop, maxMessageSize: self.configuration.maxReceiveMessageSize)
            let handler = lease.connection.handler
            let outcome = await withTaskCancellationHandler {
                await withUnsafeContinuation { (waiter: UnsafeContinuation<ClientCall.UnaryOutcome?, Never>) in
                    if loop.inEventLoop {
                        handler.value.startUnary(call, path: path, metadata: metadata, deadline: deadline, request: request, waiter: waiter)
                    } else {
                        loop.execute {
                            handler.value.startUnary(
                                call, path: path, metadata: metadata, deadline: deadline, request: request, waiter: waiter)
                        }
                    }
                }
            } onCancel: {
                call.cancel()
            }
            if let outcome { return outcome }
            // The connection went away between the pick and the stream (see `open`).
            self.update { $0.drained(entry: lease.entry, now: .now()) }
        }
        throw RPCError(.unavailable, "No connection to \(self.configuration.authority) is available")
    }

    /// Takes a stream slot and sends a plain HTTP/2 request there (see `open`).
    func startExchange(_ request: HTTP2Request, deadline: NIODeadline?) async throws -> HTTP2Exchange {
        let maxBodySize = self.configuration.maxReceiveMessageSize
        return try await self.open(deadline: deadline) { loop in
            HTTP2Exchange(eventLoop: loop, request: request, maxBodySize: maxBodySize)
        } start: { handler, exchange in
            handler.start(exchange, deadline: deadline)
        }
    }

    /// Takes a stream slot, makes the stream's owner for that connection's loop and opens the stream with `start`
    /// on the loop. A connection that turns out to be going away (its GOAWAY raced with the pick) refuses the
    /// stream before anything is sent; it then moves to another connection (gRPC's transparent retry), at most a
    /// few times.
    private func open<Stream: Sendable>(
        deadline: NIODeadline?,
        make: (any EventLoop) -> Stream,
        start: @escaping @Sendable (ClientConnectionHandler, Stream) -> Bool
    ) async throws -> Stream {
        for _ in 0..<3 {
            let lease = try await self.acquire(deadline: deadline)
            let loop = lease.connection.channel.eventLoop
            let stream = make(loop)
            let handler = lease.connection.handler
            let started: Bool
            if loop.inEventLoop {
                started = start(handler.value, stream)
            } else {
                started = try await loop.submit { start(handler.value, stream) }.get()
            }
            if started { return stream }
            // The slot goes with the connection.
            self.update { $0.drained(entry: lease.entry, now: .now()) }
        }
        throw RPCError(.unavailable, "No connection to \(self.configuration.authority) is available")
    }

    private func acquire(deadline: NIODeadline?) async throws -> Machine.Lease {
        let id = self.state.withLockedValue { state in
            state.nextID += 1
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Machine.Lease, any Error>) in
                let pending = PendingCall(continuation)
                let (result, actions) = self.state.withLockedValue {
                    $0.machine.acquire(id: id, waiter: pending, now: .now())
                }
                switch result {
                case .lease(let lease):
                    continuation.resume(returning: lease)
                case .failed(let error):
                    continuation.resume(throwing: error)
                case .waiting:
                    self.logger.debug(
                        "Call waits for a free stream",
                        metadata: ["peer": "\(self.configuration.authority)"]
                    )
                    if let deadline {
                        pending.setTimer(
                            self.group.next().scheduleTask(deadline: deadline) { [weak self] in
                                self?.giveUp(id: id, error: nil)
                            }
                        )
                    }
                    if Task.isCancelled { self.giveUp(id: id, error: RPCError(.cancelled, "The call was cancelled")) }
                }
                self.perform(actions)
            }
        } onCancel: {
            self.giveUp(id: id, error: RPCError(.cancelled, "The call was cancelled"))
        }
    }

    /// A waiting call stops waiting: its deadline passed (`error` nil) or its task was cancelled.
    private func giveUp(id: Int, error: RPCError?) {
        let (waiter, deadlineError) = self.state.withLockedValue { ($0.machine.stopWaiting(id: id), $0.machine.deadlineError()) }
        waiter?.resume(with: .failure(error ?? deadlineError))
    }

    private func update(_ event: (inout Machine) -> Machine.Actions) {
        self.perform(self.state.withLockedValue { event(&$0.machine) })
    }

    /// Carries out the machine's decisions, outside the lock.
    private func perform(_ actions: Machine.Actions) {
        for (waiter, result) in actions.resume { waiter.resume(with: result) }
        for entry in actions.connect { self.connect(entry: entry) }
        for connection in actions.close {
            connection.channel.eventLoop.execute { connection.handler.value.closeWhenIdle() }
        }
    }

    // MARK: Connections

    private func connect(entry: Int) {
        let configuration = self.configuration
        let logger = self.logger
        let bootstrap = ClientBootstrap(group: self.group.next())
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let check = configuration.addressCheck {
                        try channel.pipeline.syncOperations.addHandler(AddressCheckHandler(check: check))
                    }
                    if let tls = configuration.tls {
                        try channel.pipeline.syncOperations.addHandler(
                            TLSHandler(context: tls, serverName: configuration.tlsServerName ?? configuration.host)
                        )
                    }
                    try channel.pipeline.syncOperations.addHandler(
                        ClientConnectionHandler(configuration: configuration, logger: logger)
                    )
                }
            }
        bootstrap.connect(host: configuration.host, port: configuration.port).whenComplete { result in
            switch result {
            case .success(let channel):
                do {
                    let handler = try channel.pipeline.syncOperations.handler(type: ClientConnectionHandler.self)
                    self.attach(handler, channel: channel, entry: entry)
                } catch {
                    channel.close(promise: nil)
                    self.failed(entry: entry, error: error)
                }
            case .failure(let error):
                self.failed(entry: entry, error: error)
            }
        }
    }

    /// Wires a new connection's events to the machine (on its loop). It becomes usable with the peer's first
    /// SETTINGS; one that sends none within the connect timeout, or closes first, counts as a failed attempt.
    private func attach(_ handler: ClientConnectionHandler, channel: any Channel, entry: Int) {
        let connection = Connection(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
        handler.onPeerStreamLimit = { [weak self] limit, first in
            guard let self else { return }
            let now = NIODeadline.now()
            if first {
                self.update { $0.connected(entry: entry, connection: connection, limit: limit, now: now) }
            } else {
                self.update { $0.limitChanged(entry: entry, limit: limit, now: now) }
            }
        }
        handler.onCallEnded = { [weak self] in
            self?.update { $0.released(entry: entry, now: .now()) }
        }
        handler.onDrain = { [weak self, weak handler] in
            guard let self else { return }
            if handler?.peerStreamLimit == nil {
                self.failed(entry: entry, error: RPCError(.unavailable, "closed before its HTTP/2 SETTINGS"))
            } else {
                self.update { $0.drained(entry: entry, now: .now()) }
                self.onTrouble?()
            }
        }
        channel.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.configuration.connectTimeout)) {
            if handler.peerStreamLimit == nil { channel.close(promise: nil) }
        }
        // Events that came before the wiring (the connect callback normally runs first).
        if let limit = handler.peerStreamLimit { handler.onPeerStreamLimit?(limit, true) }
        if handler.isClosed {
            handler.onDrain?()
            // Nothing calls them any more, and they hold the connection, which holds the handler.
            handler.onPeerStreamLimit = nil
            handler.onCallEnded = nil
            handler.onDrain = nil
        }
    }

    private func failed(entry: Int, error: any Error) {
        let delay = self.state.withLockedValue { self.configuration.backoff.delay(attempt: $0.machine.connectFailures) }
        self.logger.debug(
            "Connect failed",
            metadata: ["peer": "\(self.configuration.authority)", "error": "\(error)", "retry.in": "\(delay)"]
        )
        self.update { $0.connectFailed(entry: entry, now: .now(), retryDelay: TimeAmount(delay)) }
        self.onTrouble?()
    }

    func close() async {
        let actions = self.state.withLockedValue { $0.machine.close() }
        self.perform(actions)
        for connection in actions.close {
            try? await connection.channel.closeFuture.get()
        }
    }
}
