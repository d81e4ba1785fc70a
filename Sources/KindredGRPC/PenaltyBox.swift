import NIOConcurrencyHelpers
import NIOCore

/// Addresses whose connections were closed for abuse (a flood, a glitch budget run out, too many PINGs),
/// and until when new connections from them are refused. Each offence within `forgetAfter` of the previous
/// one doubles the penalty, from `initialPenalty` up to `maxPenalty`; so a peer that reconnects to flood
/// again gets one connection per penalty period, and pays for the connection set-up each time.
///
/// The table holds at most `capacity` addresses; when full, the entry whose last offence is oldest makes
/// room. A value type with the time passed in, tested without I/O.
public struct PenaltyBox: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The penalty after a first offence. Default 1 s.
        public var initialPenalty: Duration = .seconds(1)
        /// The longest penalty. Default 60 s.
        public var maxPenalty: Duration = .seconds(60)
        /// An address with no offence for this long starts again from `initialPenalty`. Default 10 minutes.
        public var forgetAfter: Duration = .seconds(600)
        /// Most addresses remembered. Default 4096.
        public var capacity: Int = 4096

        public init() {}
    }

    struct Entry: Sendable, Hashable {
        var offences: Int
        var lastOffence: NIODeadline
        var blockedUntil: NIODeadline
    }

    public let configuration: Configuration
    private(set) var entries: [String: Entry] = [:]

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// Addresses currently remembered.
    public var count: Int { self.entries.count }

    /// Records an abusive connection from `address`; returns the penalty now in force for it.
    @discardableResult
    public mutating func recordAbuse(from address: String, now: NIODeadline) -> Duration {
        var offences = 1
        if let entry = self.entries[address], now - entry.lastOffence < TimeAmount(self.configuration.forgetAfter) {
            offences = entry.offences + 1
        }
        if self.entries[address] == nil && self.entries.count >= self.configuration.capacity {
            self.evict(now: now)
        }
        let penalty = self.penalty(offences: offences)
        self.entries[address] = Entry(offences: offences, lastOffence: now, blockedUntil: now + TimeAmount(penalty))
        return penalty
    }

    /// Whether a new connection from `address` must be refused at `now`.
    public func isBlocked(_ address: String, now: NIODeadline) -> Bool {
        guard let entry = self.entries[address] else { return false }
        return now < entry.blockedUntil
    }

    /// `initialPenalty × 2^(offences − 1)`, at most `maxPenalty`.
    func penalty(offences: Int) -> Duration {
        let doublings = min(max(offences - 1, 0), 30)
        let penalty = self.configuration.initialPenalty * (1 << doublings)
        return min(penalty, self.configuration.maxPenalty)
    }

    /// Drops forgotten entries; if none, the one whose last offence is oldest.
    private mutating func evict(now: NIODeadline) {
        let forget = TimeAmount(self.configuration.forgetAfter)
        let before = self.entries.count
        self.entries = self.entries.filter { now - $0.value.lastOffence < forget }
        if self.entries.count == before, let oldest = self.entries.min(by: { $0.value.lastOffence < $1.value.lastOffence }) {
            self.entries.removeValue(forKey: oldest.key)
        }
    }
}

/// The server's penalty box, shared by its connections (which record abuse) and its accept path (which
/// refuses penalised addresses). Thread-safe.
final class AbusePenalties: Sendable {
    private let box: NIOLockedValueBox<PenaltyBox>

    init(configuration: PenaltyBox.Configuration) {
        self.box = NIOLockedValueBox(PenaltyBox(configuration: configuration))
    }

    func recordAbuse(from address: String) -> Duration {
        let now = NIODeadline.now()
        return self.box.withLockedValue { $0.recordAbuse(from: address, now: now) }
    }

    func isBlocked(_ address: String) -> Bool {
        let now = NIODeadline.now()
        return self.box.withLockedValue { $0.isBlocked(address, now: now) }
    }

    func blockedUntil(_ address: String, now: NIODeadline) -> NIODeadline? {
        self.box.withLockedValue { $0.blockedUntil(address, now: now) }
    }
}

extension PenaltyBox {
    /// Until when new connections from `address` are penalised at `now`, if they are.
    public func blockedUntil(_ address: String, now: NIODeadline) -> NIODeadline? {
        guard let entry = self.entries[address], now < entry.blockedUntil else { return nil }
        return entry.blockedUntil
    }
}

/// What the accept path does with new connections from penalised addresses: holds them (accepted, never read,
/// never answered) until the penalty ends, so an attacker that reconnects as soon as its connection ends waits
/// instead of spinning through thousands of refused connections a second; beyond `capacity` connections held at
/// once, refuses them at once as before, so file descriptors stay bounded. A value type with the time passed
/// in, tested without I/O.
public struct AbuseTarpit: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Most connections held at once; more are refused at once. Default 256.
        public var capacity: Int = 256
        /// Longest a connection is held, whatever its address's penalty. Default 60 s (the longest penalty).
        public var maxHold: Duration = .seconds(60)

        public init() {}
    }

    enum Decision: Sendable, Hashable {
        /// Not penalised: served.
        case accept
        /// Penalised: held, then closed at the deadline.
        case hold(until: NIODeadline)
        /// Penalised and the tarpit is full: closed now.
        case refuse
    }

    public let configuration: Configuration
    /// Connections held now.
    private(set) var held = 0

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// The fate of a new connection whose address is penalised until `blockedUntil` (nil: not penalised).
    mutating func admit(blockedUntil: NIODeadline?, now: NIODeadline) -> Decision {
        guard let blockedUntil, now < blockedUntil else { return .accept }
        guard self.held < self.configuration.capacity else { return .refuse }
        self.held += 1
        return .hold(until: min(blockedUntil, now + TimeAmount(self.configuration.maxHold)))
    }

    /// A held connection was closed.
    mutating func release() {
        self.held = max(0, self.held - 1)
    }
}
