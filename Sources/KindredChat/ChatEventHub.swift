import KindredProto
import KindredProtobuf
import NIOConcurrencyHelpers

/// The live side of Subscribe in one chat-server: every replica LISTENs on one channel (`NotificationFeed`), and
/// the hub hands each notification to the streams of the user it is for. Each stream has a bounded queue: a
/// subscriber that does not keep up overflows it and its stream ends (SUBSCRIBER_TOO_SLOW), so a slow client
/// never makes the server buffer without bound; it resumes from its last token.
public final class ChatEventHub: Sendable {
    /// What a stream hears.
    public enum Signal: Sendable, Hashable {
        /// A log event of the user at `sequence`; the event itself when the notification carried it.
        case logged(sequence: Int64, event: Kindred.Chat.V1.ChatEvent?)
        /// An ephemeral event (typing).
        case ephemeral(Kindred.Chat.V1.ChatEvent)
        /// The LISTEN connection was (re)established: read the log for what may have been missed.
        case resynchronize
        /// The heartbeat interval passed.
        case tick
    }

    /// Why a stream's signals ended.
    public enum EndReason: Sendable, Hashable {
        case overflow, draining
    }

    private struct Subscriber {
        var user: String
        var continuation: AsyncStream<Signal>.Continuation
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var byUser: [String: Set<Int>] = [:]
        var ended: [Int: EndReason] = [:]
        var nextID = 0
        var draining = false
        var listening = false
    }

    private let state = NIOLockedValueBox(State())
    /// Signals a stream may have queued before it counts as too slow.
    public let capacity: Int

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// Registers a stream of `user`. Returns nil while the server drains.
    public func subscribe(_ user: String) -> (id: Int, signals: AsyncStream<Signal>)? {
        let (stream, continuation) = AsyncStream.makeStream(of: Signal.self, bufferingPolicy: .bufferingOldest(self.capacity))
        let id: Int? = self.state.withLockedValue { state in
            guard !state.draining else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = Subscriber(user: user, continuation: continuation)
            state.byUser[user, default: []].insert(state.nextID)
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return nil
        }
        return (id, stream)
    }

    /// Removes a stream; returns why its signals ended early, if they did.
    @discardableResult
    public func unsubscribe(_ id: Int) -> EndReason? {
        let (subscriber, reason) = self.state.withLockedValue { state -> (Subscriber?, EndReason?) in
            guard let subscriber = state.subscribers.removeValue(forKey: id) else {
                return (nil, state.ended.removeValue(forKey: id))
            }
            state.byUser[subscriber.user]?.remove(id)
            if state.byUser[subscriber.user]?.isEmpty == true { state.byUser[subscriber.user] = nil }
            return (subscriber, state.ended.removeValue(forKey: id))
        }
        subscriber?.continuation.finish()
        return reason
    }

    /// Why the stream's signals ended (nil while it is live).
    public func endReason(_ id: Int) -> EndReason? {
        self.state.withLockedValue { $0.ended[id] }
    }

    /// Open streams of `user` on this server.
    public func streams(of user: String) -> Int {
        self.state.withLockedValue { $0.byUser[user]?.count ?? 0 }
    }

    /// Open streams.
    public var subscriberCount: Int { self.state.withLockedValue { $0.subscribers.count } }

    /// Whether the LISTEN connection is up.
    public var isListening: Bool { self.state.withLockedValue { $0.listening } }

    /// A notification payload: `e <user> <sequence> <base64 event or ->`, `t <user> <base64 event>`, or `r`
    /// (a replica started: every stream reads its log for what may have been missed).
    public func dispatch(_ payload: String) {
        if payload == "r" {
            self.broadcast(.resynchronize)
            return
        }
        let parts = payload.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count >= 3 else { return }
        let user = String(parts[1])
        let signal: Signal
        switch parts[0] {
        case "e":
            guard parts.count == 4, let sequence = Int64(parts[2]) else { return }
            let event = Base64.decode(parts[3]).flatMap { try? Kindred.Chat.V1.ChatEvent(serializedBytes: $0) }
            signal = .logged(sequence: sequence, event: event)
        case "t":
            guard let bytes = Base64.decode(parts[2]), let event = try? Kindred.Chat.V1.ChatEvent(serializedBytes: bytes)
            else { return }
            signal = .ephemeral(event)
        default:
            return
        }
        self.send(signal, toUser: user)
    }

    /// The LISTEN connection is up (again): every stream reads its log for what may have been missed.
    public func connected() {
        self.state.withLockedValue { $0.listening = true }
        self.broadcast(.resynchronize)
    }

    /// The LISTEN connection is lost.
    public func lost() {
        self.state.withLockedValue { $0.listening = false }
    }

    /// The heartbeat interval passed.
    public func tick() {
        self.broadcast(.tick)
    }

    /// Ends every stream (the server stops) and refuses new ones.
    public func drain() {
        let continuations = self.state.withLockedValue { state -> [AsyncStream<Signal>.Continuation] in
            state.draining = true
            for id in state.subscribers.keys where state.ended[id] == nil { state.ended[id] = .draining }
            return state.subscribers.values.map(\.continuation)
        }
        for continuation in continuations { continuation.finish() }
    }

    private func send(_ signal: Signal, toUser user: String) {
        let targets = self.state.withLockedValue { state in
            (state.byUser[user] ?? []).compactMap { id in state.subscribers[id].map { (id, $0.continuation) } }
        }
        for (id, continuation) in targets { self.yield(signal, to: continuation, id: id) }
    }

    private func broadcast(_ signal: Signal) {
        let targets = self.state.withLockedValue { state in state.subscribers.map { ($0.key, $0.value.continuation) } }
        for (id, continuation) in targets { self.yield(signal, to: continuation, id: id) }
    }

    private func yield(_ signal: Signal, to continuation: AsyncStream<Signal>.Continuation, id: Int) {
        if case .dropped = continuation.yield(signal) {
            // The stream's queue is full: end it rather than buffer more.
            self.state.withLockedValue { state in
                if state.ended[id] == nil { state.ended[id] = .overflow }
            }
            continuation.finish()
        }
    }
}
