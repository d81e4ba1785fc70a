import KindredOpenSSL
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Keeps up to `connectionCount` HTTP/2 connections to one target. Calls go round-robin to ready connections;
/// a slot whose connection closed reconnects on demand, after an exponential backoff with jitter when the
/// last attempt failed. Calls fail fast with UNAVAILABLE when no connection can be had.
final class ConnectionPool: Sendable {
    private let configuration: GRPCClientConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state: NIOLockedValueBox<State>

    private struct State {
        var slots: [Slot]
        var next = 0
        var closed = false
    }

    private enum Slot {
        case idle(failures: Int, notBefore: NIODeadline?)
        case connecting(EventLoopFuture<Connection>, failures: Int)
        case ready(Connection)
    }

    struct Connection: Sendable {
        let channel: any Channel
        let handler: NIOLoopBound<ClientConnectionHandler>
        /// The pool slot holding it.
        let slot: Int
    }

    init(configuration: GRPCClientConfiguration, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        let slots = Array(repeating: Slot.idle(failures: 0, notBefore: nil), count: max(1, configuration.connectionCount))
        self.state = NIOLockedValueBox(State(slots: slots))
    }

    /// Picks a connection and opens a stream for the call on it. A connection that turns out to be going away
    /// (its GOAWAY raced with the pick) refuses the call before anything is sent; the call then moves to another
    /// connection (gRPC's transparent retry), at most a few times.
    func startCall(path: String, metadata: Metadata, deadline: NIODeadline?) async throws -> ClientCall {
        for _ in 0..<3 {
            let connection = try await self.connection()
            let loop = connection.channel.eventLoop
            let call = ClientCall(eventLoop: loop, maxMessageSize: self.configuration.maxReceiveMessageSize)
            let handler = connection.handler
            let started: Bool
            if loop.inEventLoop {
                started = handler.value.start(call, path: path, metadata: metadata, deadline: deadline)
            } else {
                started = try await loop.submit {
                    handler.value.start(call, path: path, metadata: metadata, deadline: deadline)
                }.get()
            }
            if started { return call }
            self.drained(index: connection.slot, channel: connection.channel)
        }
        throw RPCError(.unavailable, "No connection to \(self.configuration.authority) is available")
    }

    private enum Choice {
        case ready(Connection)
        case wait(EventLoopFuture<Connection>)
        case connect(index: Int, failures: Int)
        case unavailable
    }

    private func connection() async throws -> Connection {
        let now = NIODeadline.now()
        let choice = self.state.withLockedValue { state -> Choice in
            if state.closed { return .unavailable }
            let count = state.slots.count
            var pending: EventLoopFuture<Connection>?
            var connectable: (Int, Int)?
            for offset in 0..<count {
                let index = (state.next + offset) % count
                switch state.slots[index] {
                case .ready(let connection):
                    state.next = (index + 1) % count
                    return .ready(connection)
                case .connecting(let future, _):
                    pending = pending ?? future
                case .idle(let failures, let notBefore):
                    if connectable == nil && (notBefore == nil || notBefore! <= now) {
                        connectable = (index, failures)
                    }
                }
            }
            // Grow towards connectionCount while connections are being made, so load spreads.
            if let (index, failures) = connectable {
                return .connect(index: index, failures: failures)
            }
            if let pending { return .wait(pending) }
            return .unavailable
        }
        switch choice {
        case .ready(let connection):
            return connection
        case .wait(let future):
            return try await Self.await(future)
        case .connect(let index, let failures):
            let future = self.connect(index: index, failures: failures)
            return try await Self.await(future)
        case .unavailable:
            throw RPCError(.unavailable, "No connection to \(self.configuration.authority) is available")
        }
    }

    private static func await(_ future: EventLoopFuture<Connection>) async throws -> Connection {
        do {
            return try await future.get()
        } catch let error as RPCError {
            throw error
        } catch {
            throw RPCError(.unavailable, "Failed to connect: \(error)")
        }
    }

    private func connect(index: Int, failures: Int) -> EventLoopFuture<Connection> {
        let configuration = self.configuration
        let logger = self.logger
        let loop = self.group.next()
        let promise = loop.makePromise(of: Connection.self)
        self.state.withLockedValue { $0.slots[index] = .connecting(promise.futureResult, failures: failures) }

        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
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
                    let connection = Connection(
                        channel: channel,
                        handler: NIOLoopBound(handler, eventLoop: channel.eventLoop),
                        slot: index
                    )
                    handler.onDrain = { [weak self] in self?.drained(index: index, channel: channel) }
                    self.state.withLockedValue { $0.slots[index] = .ready(connection) }
                    promise.succeed(connection)
                } catch {
                    channel.close(promise: nil)
                    self.failed(index: index, failures: failures, error: error, promise: promise)
                }
            case .failure(let error):
                self.failed(index: index, failures: failures, error: error, promise: promise)
            }
        }
        return promise.futureResult
    }

    private func failed(index: Int, failures: Int, error: any Error, promise: EventLoopPromise<Connection>) {
        let delay = self.configuration.backoff.delay(attempt: failures)
        self.logger.debug(
            "Connect failed",
            metadata: ["peer": "\(self.configuration.authority)", "error": "\(error)", "retry.in": "\(delay)"]
        )
        self.state.withLockedValue {
            $0.slots[index] = .idle(failures: failures + 1, notBefore: .now() + TimeAmount(delay))
        }
        promise.fail(RPCError(.unavailable, "Failed to connect to \(self.configuration.authority)"))
    }

    /// The connection in `index` stopped taking calls (GOAWAY or closed): the slot reconnects on next use.
    private func drained(index: Int, channel: any Channel) {
        self.state.withLockedValue { state in
            if case .ready(let connection) = state.slots[index], connection.channel === channel {
                state.slots[index] = .idle(failures: 0, notBefore: nil)
            }
        }
        // A drained connection closes once its last call ends (the server closes it after GOAWAY).
    }

    func close() async {
        let connections = self.state.withLockedValue { state -> [Connection] in
            state.closed = true
            return state.slots.compactMap { slot in
                if case .ready(let connection) = slot { return connection }
                return nil
            }
        }
        for connection in connections {
            connection.channel.eventLoop.execute { connection.handler.value.closeWhenIdle() }
        }
        for connection in connections {
            try? await connection.channel.closeFuture.get()
        }
    }
}
