import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A NATS client on one TCP connection at a time (plain TCP, no auth: the cluster's loopback or private network),
/// over a list of servers: it connects to the first that answers and, when the connection breaks, to the next
/// ones in turn (backoff 50 ms doubling to 2 s), subscribing again to what it had subscribed. Calls made while it is
/// reconnecting throw ``NATSProtocolError/Kind/notConnected`` (the caller retries: nothing is buffered), and
/// requests waiting on the broken connection throw ``NATSProtocolError/Kind/connectionLost``.
///
/// ```swift
/// let client = NATSClient(servers: NATSServerAddress.parseList("nats://127.0.0.1:4222")!, logger: logger)
/// try await client.connect()
/// try await client.publish("greetings", payload: Array("hello".utf8))
/// let answer = try await client.request("service.echo", payload: [], timeout: .seconds(2))
/// await client.close()
/// ```
///
/// Requests share one wildcard subscription (`_INBOX.<random>.*`); each request waits on its own token.
public final class NATSClient: Sendable {
    public let servers: [NATSServerAddress]
    private let name: String
    private let group: any EventLoopGroup
    private let logger: Logger
    private let inbox: String
    private let state = NIOLockedValueBox(State())

    private static let inboxSID: UInt64 = 1

    struct State {
        var channel: (any Channel)?
        var maxPayload = 1 << 20
        var closed = false
        var nextServer = 0
        var nextSID: UInt64 = 2
        var nextToken: UInt64 = 1
        var subscriptions: [UInt64: Subscription] = [:]
        var waiters: [String: ReplyWaiter] = [:]
        /// Waiters on a subscription of their own (pulls: JetStream delivers on the pull's reply subject, but each
        /// message keeps its own subject, so only the subscription tells them apart).
        var subscribedWaiters: [UInt64: ReplyWaiter] = [:]
        var supervisor: Task<Void, Never>?
    }

    struct Subscription {
        var subject: String
        var queue: String?
        var continuation: AsyncStream<NATSMessage>.Continuation
    }

    /// - Parameter name: the connection's name in the server's monitoring.
    public init(
        servers: [NATSServerAddress],
        name: String = "kindred",
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) {
        precondition(!servers.isEmpty, "a NATS client needs at least one server")
        self.servers = servers
        self.name = name
        self.group = eventLoopGroup
        self.logger = logger
        self.inbox = "_INBOX." + NATSClient.randomToken()
    }

    /// Connects to the first server that answers (each tried once, in order) and keeps the connection up until
    /// ``close()``. Throws ``NATSProtocolError/Kind/notConnected`` when none answered.
    public func connect() async throws {
        try await self.connectToAny()
        let task = Task { await self.supervise() }
        let closed = self.state.withLockedValue { state in
            state.supervisor = task
            return state.closed
        }
        if closed { task.cancel() }
    }

    /// Whether a connection is up now.
    public var isConnected: Bool { self.state.withLockedValue { $0.channel != nil } }

    /// The server this client is connected to now, nil while reconnecting.
    public var connectedServer: String? {
        self.state.withLockedValue { $0.channel?.remoteAddress.map { "\($0)" } }
    }

    /// Closes the connection; waiting requests throw ``NATSProtocolError/Kind/closed``, subscriptions end.
    public func close() async {
        let (channel, supervisor, waiters, subscriptions) = self.state.withLockedValue { state in
            state.closed = true
            defer {
                state.waiters = [:]
                state.subscribedWaiters = [:]
                state.subscriptions = [:]
                state.channel = nil
            }
            return (
                state.channel, state.supervisor, Array(state.waiters.values) + Array(state.subscribedWaiters.values),
                state.subscriptions
            )
        }
        supervisor?.cancel()
        for waiter in waiters { waiter.finish(.failure(NATSProtocolError(.closed, "the client was closed"))) }
        for subscription in subscriptions.values { subscription.continuation.finish() }
        try? await channel?.close()
        await supervisor?.value
    }

    // MARK: Publishing and subscribing

    /// Publishes `payload` (with `headers`, if any) to `subject`.
    public func publish(
        _ subject: String, payload: [UInt8], headers: NATSHeaders? = nil, replyTo: String? = nil
    ) async throws {
        try await self.send(try self.encodePublish(subject, payload: payload, headers: headers, replyTo: replyTo))
    }

    /// Publishes with a reply inbox and returns the first answer. A 503 status (nobody subscribes to `subject`)
    /// throws ``NATSProtocolError/Kind/server``; no answer within `timeout` throws `timeout`.
    public func request(
        _ subject: String, payload: [UInt8], headers: NATSHeaders? = nil, timeout: Duration
    ) async throws -> NATSMessage {
        let answers = try await self.collect(
            subject, payload: payload, headers: headers, count: 1, timeout: timeout, endsOnStatus: false)
        guard let answer = answers.first else {
            throw NATSProtocolError(.timeout, "no answer on \(subject) within \(timeout)")
        }
        if answer.status == 503 { throw NATSProtocolError(.server, "no responders on \(subject)") }
        return answer
    }

    /// Publishes with a reply inbox and gathers up to `count` answers: returns when it has them, when a status
    /// message other than 100 arrives (JetStream ends a pull with 404, 408 or 409; the status is not returned),
    /// or at `timeout` with what arrived (a 503 throws). `ownSubscription`: the answers carry subjects of their own
    /// (a JetStream pull), so the inbox gets a subscription of its own for the call.
    func collect(
        _ subject: String, payload: [UInt8], headers: NATSHeaders? = nil, count: Int, timeout: Duration,
        endsOnStatus: Bool = true, ownSubscription: Bool = false
    ) async throws -> [NATSMessage] {
        let waiter = ReplyWaiter(count: count, endsOnStatus: endsOnStatus)
        let (token, sid) = self.state.withLockedValue { state -> (String, UInt64) in
            defer {
                state.nextToken += 1
                if ownSubscription { state.nextSID += 1 }
            }
            return (String(state.nextToken), ownSubscription ? state.nextSID : 0)
        }
        // The own inbox has two tokens after the prefix: the shared `<prefix>.*` subscription does not match it.
        let replyTo = ownSubscription ? "\(self.inbox).p.\(token)" : "\(self.inbox).\(token)"
        var bytes = ownSubscription ? Array(Self.sub(replyTo, queue: nil, sid: sid).utf8) : []
        bytes += try self.encodePublish(subject, payload: payload, headers: headers, replyTo: replyTo)
        let registered = self.state.withLockedValue { state -> Bool in
            guard state.channel != nil else { return false }
            if ownSubscription { state.subscribedWaiters[sid] = waiter } else { state.waiters[token] = waiter }
            return true
        }
        guard registered else { throw NATSProtocolError(.notConnected, "not connected to any NATS server") }
        let forget: @Sendable () -> Void = { [weak self] in
            self?.state.withLockedValue { state in
                if ownSubscription { state.subscribedWaiters[sid] = nil } else { state.waiters[token] = nil }
            }
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            forget()
            waiter.finish(nil)
        }
        defer { timer.cancel() }
        do {
            try await self.send(bytes)
        } catch {
            forget()
            waiter.finish(.failure(error))
            throw error
        }
        let result: Result<[NATSMessage], any Error> = await withTaskCancellationHandler {
            do { return .success(try await waiter.value()) } catch { return .failure(error) }
        } onCancel: {
            waiter.finish(.failure(CancellationError()))
        }
        forget()
        if ownSubscription, let channel = self.state.withLockedValue({ $0.channel }) {
            try? await channel.writeAndFlush(channel.allocator.buffer(string: "UNSUB \(sid)\r\n"))
        }
        let messages = try result.get()
        if let status = messages.last?.status, status == 503 {
            throw NATSProtocolError(.server, "no responders on \(subject)")
        }
        return messages
    }

    /// Subscribes to `subject` (wildcards allowed), in `queue` if given. The messages arrive on the returned
    /// subscription until ``unsubscribe(_:)`` or ``close()``; the subscription is renewed after a reconnect
    /// (messages published meanwhile are not delivered: core NATS is at most once). A subscriber that falls
    /// 10,000 messages behind loses the oldest.
    public func subscribe(to subject: String, queue: String? = nil) async throws -> NATSSubscription {
        try Self.validate(subject: subject)
        if let queue { try Self.validate(subject: queue) }
        let (stream, continuation) = AsyncStream.makeStream(
            of: NATSMessage.self, bufferingPolicy: .bufferingNewest(10_000))
        let (sid, channel) = self.state.withLockedValue { state -> (UInt64, (any Channel)?) in
            defer { state.nextSID += 1 }
            state.subscriptions[state.nextSID] = Subscription(subject: subject, queue: queue, continuation: continuation)
            return (state.nextSID, state.channel)
        }
        if let channel {
            try? await channel.writeAndFlush(channel.allocator.buffer(string: Self.sub(subject, queue: queue, sid: sid)))
        }
        return NATSSubscription(sid: sid, subject: subject, messages: stream)
    }

    public func unsubscribe(_ subscription: NATSSubscription) async {
        let (entry, channel) = self.state.withLockedValue { state in
            (state.subscriptions.removeValue(forKey: subscription.sid), state.channel)
        }
        entry?.continuation.finish()
        if let channel {
            try? await channel.writeAndFlush(channel.allocator.buffer(string: "UNSUB \(subscription.sid)\r\n"))
        }
    }

    // MARK: Connection

    private func connectToAny() async throws {
        let start = self.state.withLockedValue { $0.nextServer }
        var lastError: (any Error)?
        for offset in 0..<self.servers.count {
            let index = (start + offset) % self.servers.count
            if self.state.withLockedValue({ $0.closed }) { throw NATSProtocolError(.closed, "the client was closed") }
            do {
                try await self.open(self.servers[index])
                self.state.withLockedValue { $0.nextServer = (index + 1) % self.servers.count }
                return
            } catch {
                lastError = error
            }
        }
        throw NATSProtocolError(.notConnected, "no NATS server answered (last: \(lastError.map { "\($0)" } ?? "none"))")
    }

    private func open(_ server: NATSServerAddress) async throws {
        let eventLoop = self.group.next()
        let ready = eventLoop.makePromise(of: NATSServerInfo.self)
        let connect = Self.connectJSON(name: self.name)
        let logger = self.logger
        let client = self
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.seconds(2))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                // The pipeline holds the client until the channel closes (its handlers are then removed).
                let received: @Sendable (NATSMessage) -> Void = { message in client.received(message) }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NATSClientHandler(connectJSON: connect, ready: ready, logger: logger, received: received))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: server.host, port: server.port).get()
        } catch {
            ready.fail(error)
            throw error
        }
        let handshake = eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
        let info: NATSServerInfo
        do {
            info = try await ready.futureResult.get()
            handshake.cancel()
        } catch {
            handshake.cancel()
            try? await channel.close()
            throw error
        }
        // Subscriptions first, so that nothing sent on the new connection can be answered before them.
        let subscriptions = self.state.withLockedValue { $0.subscriptions }
        var text = Self.sub(self.inbox + ".*", queue: nil, sid: Self.inboxSID)
        for (sid, subscription) in subscriptions { text += Self.sub(subscription.subject, queue: subscription.queue, sid: sid) }
        try await channel.writeAndFlush(channel.allocator.buffer(string: text))
        let closed = self.state.withLockedValue { state -> Bool in
            guard !state.closed else { return true }
            state.channel = channel
            if let maxPayload = info.maxPayload, maxPayload > 0 { state.maxPayload = maxPayload }
            return false
        }
        if closed {
            try? await channel.close()
            throw NATSProtocolError(.closed, "the client was closed")
        }
        self.logger.debug("NATS connected", metadata: ["nats.server": "\(server)"])
    }

    /// Waits for the connection to break, fails what waited on it, and connects again.
    private func supervise() async {
        while !Task.isCancelled {
            guard let channel = self.state.withLockedValue({ $0.channel }) else { return }
            try? await channel.closeFuture.get()
            let (waiters, closed) = self.state.withLockedValue { state in
                defer {
                    state.waiters = [:]
                    state.subscribedWaiters = [:]
                    state.channel = nil
                }
                return (Array(state.waiters.values) + Array(state.subscribedWaiters.values), state.closed)
            }
            for waiter in waiters {
                waiter.finish(.failure(NATSProtocolError(.connectionLost, "the NATS connection broke")))
            }
            if closed { return }
            self.logger.warning("NATS connection lost, reconnecting")
            var delay: Duration = .milliseconds(50)
            while !Task.isCancelled {
                do {
                    try await self.connectToAny()
                    self.logger.info("NATS reconnected", metadata: ["nats.server": "\(self.connectedServer ?? "?")"])
                    break
                } catch {
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(2))
                }
            }
        }
    }

    private func received(_ message: NATSMessage) {
        if let waiter = self.state.withLockedValue({ $0.subscribedWaiters[message.sid] }) {
            if waiter.add(message) { self.state.withLockedValue { _ = $0.subscribedWaiters.removeValue(forKey: message.sid) } }
            return
        }
        if message.sid == Self.inboxSID {
            let token = message.subject.hasPrefix(self.inbox + ".") ? String(message.subject.dropFirst(self.inbox.count + 1)) : ""
            let waiter = self.state.withLockedValue { $0.waiters[token] }
            if let waiter, waiter.add(message) {
                self.state.withLockedValue { _ = $0.waiters.removeValue(forKey: token) }
            }
            return
        }
        let subscription = self.state.withLockedValue { $0.subscriptions[message.sid] }
        subscription?.continuation.yield(message)
    }

    private func send(_ bytes: [UInt8]) async throws {
        guard let channel = self.state.withLockedValue({ $0.channel }) else {
            throw NATSProtocolError(.notConnected, "not connected to any NATS server")
        }
        do {
            try await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes))
        } catch {
            throw NATSProtocolError(.connectionLost, "the NATS connection broke while sending")
        }
    }

    // MARK: Encoding

    private func encodePublish(
        _ subject: String, payload: [UInt8], headers: NATSHeaders?, replyTo: String?
    ) throws -> [UInt8] {
        try Self.validate(subject: subject)
        if let replyTo { try Self.validate(subject: replyTo) }
        let headerBytes = headers?.encoded ?? []
        let total = headerBytes.count + payload.count
        let maxPayload = self.state.withLockedValue { $0.maxPayload }
        guard total <= maxPayload else {
            throw NATSProtocolError(.tooLarge, "a message of \(total) bytes exceeds the server's \(maxPayload)")
        }
        let reply = replyTo.map { " " + $0 } ?? ""
        var bytes: [UInt8] = []
        bytes.reserveCapacity(total + subject.utf8.count + 40)
        if headers != nil {
            bytes += Array("HPUB \(subject)\(reply) \(headerBytes.count) \(total)\r\n".utf8)
            bytes += headerBytes
        } else {
            bytes += Array("PUB \(subject)\(reply) \(total)\r\n".utf8)
        }
        bytes += payload
        bytes += [13, 10]
        return bytes
    }

    private static func sub(_ subject: String, queue: String?, sid: UInt64) -> String {
        "SUB \(subject)\(queue.map { " " + $0 } ?? "") \(sid)\r\n"
    }

    /// A subject is non-empty printable ASCII without spaces, of at most 1024 bytes.
    static func validate(subject: String) throws(NATSProtocolError) {
        guard !subject.isEmpty, subject.utf8.count <= 1024, subject.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
            throw NATSProtocolError(.malformed, "a subject must be 1...1024 printable ASCII bytes without spaces")
        }
    }

    private static func connectJSON(name: String) -> String {
        let fields: [String: Any] = [
            "verbose": false, "pedantic": false, "headers": true, "no_responders": true, "lang": "swift",
            "version": "1.0", "protocol": 1, "name": name,
        ]
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func randomToken() -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        return String((0..<22).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
    }
}

/// A subscription's messages, until it is unsubscribed or the client closed.
public struct NATSSubscription: Sendable {
    let sid: UInt64
    public let subject: String
    public let messages: AsyncStream<NATSMessage>
}
