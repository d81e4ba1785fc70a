/// Where one Subscribe stream is in its user's event log, and what to do with each thing it hears: the
/// exactly-once rule of live delivery as a value (tested without I/O).
///
/// The stream registers with the hub before it reads the log, so every event committed after the read is also
/// announced; announcements of events already read are skipped, and a gap (a lost or too-large notification,
/// a reconnected LISTEN) is filled from the table. Each position is handed to the client once, in order.
public struct SubscriptionCursor: Sendable, Hashable {
    /// The last log position handed to the client.
    public private(set) var position: Int64
    /// Whether anything was written since the last heartbeat tick.
    private var wroteSinceTick = false

    public init(position: Int64) {
        self.position = position
    }

    public enum Action: Sendable, Hashable {
        /// Write the announced event; it is the next position.
        case deliver
        /// Already handed out (or older): nothing to do.
        case skip
        /// Read the log after `after` and hand out what comes back (through `fetched`).
        case fetch(after: Int64)
        /// Nothing was written for a whole heartbeat interval: send a heartbeat.
        case heartbeat
    }

    /// An event of the user's log was announced at `sequence`; `carriesEvent` when the notification holds it.
    public mutating func announced(sequence: Int64, carriesEvent: Bool) -> Action {
        if sequence <= self.position { return .skip }
        if sequence == self.position + 1 && carriesEvent {
            self.position = sequence
            self.wroteSinceTick = true
            return .deliver
        }
        return .fetch(after: self.position)
    }

    /// The LISTEN connection was (re)established: notifications may have been lost meanwhile.
    public func resynchronize() -> Action { .fetch(after: self.position) }

    /// The heartbeat interval passed. No read of the log here: while the LISTEN connection stays up no
    /// notification is lost (one too large to carry, or a gap, is fetched when it is announced), and after a
    /// reconnect `resynchronize` reads it; a read per stream per tick would be a burst of queries every
    /// interval for nothing.
    public mutating func tick() -> Action {
        defer { self.wroteSinceTick = false }
        return self.wroteSinceTick ? .skip : .heartbeat
    }

    /// Positions read from the log: returns those to hand out (in order, each once) and moves past them.
    public mutating func fetched(_ sequences: [Int64]) -> [Int64] {
        var out: [Int64] = []
        for sequence in sequences.sorted() where sequence > self.position {
            self.position = sequence
            out.append(sequence)
        }
        if !out.isEmpty { self.wroteSinceTick = true }
        return out
    }

    /// Something other than a log event (typing, heartbeat) was written.
    public mutating func wroteEphemeral() {
        self.wroteSinceTick = true
    }
}

/// The opaque resume token of the contract: `c1.<position>` in the user's log (at most 128 characters). It
/// names a position in the caller's own log only, so it reveals nothing and cannot reach another user's events.
public enum ResumeToken {
    public static func encode(_ position: Int64) -> String { "c1.\(position)" }

    /// The position, or nil for a malformed token.
    public static func decode(_ token: String) -> Int64? {
        guard token.utf8.count <= 128, token.hasPrefix("c1."), let value = Int64(token.dropFirst(3)), value >= 0
        else { return nil }
        return value
    }
}
