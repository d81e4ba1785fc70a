import NIOCore

/// Frames a peer sent that cost us work without carrying a request or a response. nghttp2 1.52 processes
/// them correctly but has no limit on how many arrive (upstream nghttp2 ≥ 1.62 calls them "glitches"), so
/// the server charges them to an `HTTP2AbuseBudget`.
public enum HTTP2PeerEvent: Hashable, Sendable, CaseIterable {
    /// A DATA frame with no payload and no END_STREAM.
    case emptyData
    /// A WINDOW_UPDATE opening less than `smallWindowUpdateThreshold` bytes.
    case smallWindowUpdate
    /// A SETTINGS frame (not an ACK). The first one is the handshake.
    case settings
    /// A RST_STREAM from the peer.
    case streamReset
    /// A stream we refused (over the concurrency limit, or while draining).
    case streamRefused
    /// A PRIORITY frame (gRPC clients send none; nghttp2 ignores its content since RFC 9113).
    case priority
    /// A header block over SETTINGS_MAX_HEADER_LIST_SIZE (the stream was reset).
    case headerListTooLarge
    /// A frame nghttp2 rejected as invalid (it resets the stream or closes the connection itself).
    case invalidFrame

    /// WINDOW_UPDATE increments below this many bytes count as `smallWindowUpdate`. Real peers (nghttp2,
    /// grpcio, grpc-go) batch updates to a good fraction of the window; a flood of +1 updates costs us a frame
    /// and a flow-control pass each.
    public static let smallWindowUpdateThreshold: Int32 = 1024
}

/// A per-connection token bucket of "glitches": every `HTTP2PeerEvent` costs tokens, tokens refill at a
/// steady rate up to `burst`, and a connection whose budget runs out is closed with GOAWAY
/// ENHANCE_YOUR_CALM. Real clients stay far below it: they send a handful of SETTINGS, never empty
/// DATA, and cancel a call now and then.
///
/// A value type with the time passed in, so it is tested without I/O.
public struct HTTP2AbuseBudget: Sendable, Hashable {
    /// Limits of the budget.
    public struct Configuration: Sendable, Hashable {
        /// Tokens available at once (and at the start). Default 1000, as upstream nghttp2's glitch limit.
        public var burst: Int = 1000
        /// Tokens added per second, up to `burst`. Default 33, as upstream nghttp2's glitch limit.
        public var refillPerSecond: Int = 33

        public init(burst: Int = 1000, refillPerSecond: Int = 33) {
            self.burst = burst
            self.refillPerSecond = refillPerSecond
        }

        /// What each event costs. A rejected oversized header block costs far more than a frame: the whole
        /// block is still HPACK-decoded (up to hundreds of MB of references per block), so ten of them in a
        /// burst close the connection.
        public func cost(of event: HTTP2PeerEvent) -> Int {
            switch event {
            case .headerListTooLarge: max(1, self.burst / 10)
            case .emptyData, .smallWindowUpdate, .settings, .streamReset, .streamRefused, .priority,
                .invalidFrame:
                1
            }
        }
    }

    public let configuration: Configuration
    /// Tokens left, in millitokens so that fractional refills are not lost between frames.
    private var millitokens: Int64
    private var lastRefill: NIODeadline

    public init(configuration: Configuration = .init(), now: NIODeadline) {
        self.configuration = configuration
        self.millitokens = Int64(configuration.burst) * 1000
        self.lastRefill = now
    }

    /// Tokens left (rounded down).
    public var remaining: Int { Int(self.millitokens / 1000) }

    /// Charges one event at `now`. Returns false when the budget is exhausted: the connection must go.
    public mutating func charge(_ event: HTTP2PeerEvent, now: NIODeadline) -> Bool {
        let elapsed = now - self.lastRefill
        if elapsed.nanoseconds > 0 {
            // millitokens = ns × rate / 1e6; capped before multiplying so it never overflows.
            let cappedNanos = min(elapsed.nanoseconds, 3_600 * 1_000_000_000)
            let earned = cappedNanos / 1_000_000 * Int64(self.configuration.refillPerSecond)
            if earned > 0 {
                self.millitokens = min(Int64(self.configuration.burst) * 1000, self.millitokens + earned)
                self.lastRefill = now
            }
        }
        self.millitokens -= Int64(self.configuration.cost(of: event)) * 1000
        return self.millitokens >= 0
    }
}
