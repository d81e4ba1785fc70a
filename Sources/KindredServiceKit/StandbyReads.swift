import CoreMetrics
import KindredGRPC
import KindredPostgres
import Logging
import NIOConcurrencyHelpers

/// A streaming standby of a server's database (`KINDRED_<SERVER>_READ_DATABASE_URL`) for reads that may be slightly
/// stale, used only while it is measurably close behind the primary.
///
/// How far behind it is, is measured rather than trusted: every ``probeInterval`` the primary's WAL position is
/// noted with the time it was read (`pg_current_wal_lsn()`: every transaction committed before that moment ends
/// before it), then the standby's replay position is read (`pg_last_wal_replay_lsn()`). The standby holds
/// everything committed up to the latest noted moment whose position it has replayed; its staleness is the time
/// since then. ``client()`` hands out the standby only while that staleness is at most ``maxLag`` (and the last
/// probe worked, and it is still in recovery); otherwise callers read from the primary. What a server reads here
/// is its own choice, and never a member's own data (read-your-writes, DESIGN.md).
///
/// Metrics, labelled `pool`: `db_standby_lag_seconds` (the staleness; -1 unknown), `db_standby_lag_bytes` (WAL
/// between the primary's position and the standby's replay), `db_standby_reads_total{target}` (`standby`, or
/// `primary` when the standby was too far behind or failed).
public final class StandbyReads: Sendable {
    /// The standby's pool.
    public let standby: PostgresClient
    private let primary: PostgresClient
    /// The most staleness ``client()`` accepts.
    public let maxLag: Duration
    /// How often the lag is measured.
    public let probeInterval: Duration
    private let logger: Logger
    private let state = NIOLockedValueBox(Measure())
    private let lagSeconds, lagBytes: Gauge
    private let standbyReads, primaryReads: Counter

    /// The primary's positions noted by recent probes, and the latest staleness.
    private struct Measure {
        var samples: [(at: ContinuousClock.Instant, position: UInt64)] = []
        /// The latest moment whose committed transactions the standby is known to hold; nil: none known.
        var holdsUpTo: ContinuousClock.Instant?
        /// Whether the last probe could read both servers and the standby was in recovery.
        var healthy = false
    }

    public init(
        standby: PostgresClient, primary: PostgresClient, maxLag: Duration, probeInterval: Duration = .milliseconds(200),
        pool: String, metricsFactory: any MetricsFactory, logger: Logger
    ) {
        self.standby = standby
        self.primary = primary
        self.maxLag = maxLag
        self.probeInterval = probeInterval
        self.logger = logger
        let label = [("pool", pool)]
        self.lagSeconds = Gauge(label: "db_standby_lag_seconds", dimensions: label, factory: metricsFactory)
        self.lagBytes = Gauge(label: "db_standby_lag_bytes", dimensions: label, factory: metricsFactory)
        self.standbyReads = Counter(label: "db_standby_reads_total", dimensions: label + [("target", "standby")], factory: metricsFactory)
        self.primaryReads = Counter(label: "db_standby_reads_total", dimensions: label + [("target", "primary")], factory: metricsFactory)
        self.lagSeconds.record(-1)
    }

    /// The standby when it is at most ``maxLag`` behind, else nil (read from the primary). Counts the read.
    public func client() -> PostgresClient? {
        if let staleness = self.staleness(), staleness <= self.maxLag {
            self.standbyReads.increment()
            return self.standby
        }
        self.primaryReads.increment()
        return nil
    }

    /// A read sent to the standby failed: callers repeat it on the primary; counted there.
    public func failedOver(_ error: any Error) {
        self.primaryReads.increment()
        self.logger.warning("standby read failed; read from the primary", metadata: ["error.type": "\(type(of: error))"])
    }

    /// How far behind the standby is known to be (nil: unknown, e.g. before the first probe or after a failed one).
    public func staleness(now: ContinuousClock.Instant = .now) -> Duration? {
        self.state.withLockedValue { state in
            guard state.healthy, let holdsUpTo = state.holdsUpTo else { return nil }
            return now - holdsUpTo
        }
    }

    /// Measures until cancelled (a background task of the server).
    public func run() async {
        while !Task.isCancelled {
            await self.probe()
            try? await Task.sleep(for: self.probeInterval)
        }
    }

    /// One measurement: the primary's position, then the standby's replay position.
    public func probe() async {
        let at = ContinuousClock.now
        do {
            let current = try await self.primary.query("SELECT pg_current_wal_lsn()::text").scalar(String.self)
            let rows = try await self.standby.query("SELECT coalesce(pg_last_wal_replay_lsn()::text, '')")
            let replayed = try rows.scalar(String.self)
            guard let position = Self.position(current) else { throw StandbyProbeError.unreadablePosition(current) }
            // Not in recovery (promoted, or not a standby at all): its data may have gone its own way.
            guard let replay = Self.position(replayed) else { throw StandbyProbeError.notInRecovery }
            let (staleness, behind) = self.state.withLockedValue { state in
                state.samples.append((at, position))
                if let newest = state.samples.lastIndex(where: { $0.position <= replay }) {
                    state.holdsUpTo = max(state.holdsUpTo ?? state.samples[newest].at, state.samples[newest].at)
                    state.samples.removeFirst(newest)
                }
                if state.samples.count > 256 { state.samples.removeFirst(state.samples.count - 256) }
                state.healthy = true
                return (state.holdsUpTo.map { ContinuousClock.now - $0 }, position > replay ? position - replay : 0)
            }
            self.lagSeconds.record(staleness.map(Self.seconds) ?? -1)
            self.lagBytes.record(Int64(clamping: behind))
        } catch {
            let wasHealthy = self.state.withLockedValue { state in
                defer { state.healthy = false }
                return state.healthy
            }
            self.lagSeconds.record(-1)
            if wasHealthy {
                self.logger.warning("standby lag probe failed; reads go to the primary", metadata: ["error.type": "\(type(of: error))"])
            }
        }
    }

    /// A WAL position `X/Y` (hexadecimal halves) as a number; nil for anything else.
    static func position(_ text: String) -> UInt64? {
        let halves = text.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, let high = UInt64(halves[0], radix: 16), let low = UInt64(halves[1], radix: 16),
            high <= UInt32.max, low <= UInt32.max
        else { return nil }
        return high << 32 | low
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// Why a lag probe did not count.
enum StandbyProbeError: Error {
    case unreadablePosition(String)
    case notInRecovery
}
