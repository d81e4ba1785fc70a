import Foundation
import NIOConcurrencyHelpers

/// Runs writers one at a time across suspension points (an async mutex): every change to the projection
/// commits to PostgreSQL and then reaches memory before the next one starts, so memory follows PostgreSQL's
/// commit order and a member re-indexed from PostgreSQL never misses a concurrent swipe.
final class SerialGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    func run<T>(_ body: () async throws -> T) async rethrows -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let proceed = self.state.withLockedValue { state in
                if state.busy {
                    state.waiters.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if proceed { continuation.resume() }
        }
        defer {
            let next = self.state.withLockedValue { state in
                if state.waiters.isEmpty {
                    state.busy = false
                    return nil as CheckedContinuation<Void, Never>?
                }
                return state.waiters.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}

/// One ranked deck held for its pages: who asked, in which community, and the ranking of the first page.
struct HeldDeck: Sendable {
    var viewer: UserKey
    var community: String
    var ranked: [RankedCandidate]
    var position: Int
    var radiusKm: Int
    var widened: Bool
    var expires: ContinuousClock.Instant
}

/// The server-side cache of ranked decks behind deck tokens: an opaque random token names a ranking for 15
/// minutes, so later pages continue it without repeating anyone (and without ranking again). Bounded: the
/// oldest decks go first when full. A token belongs to its viewer: anyone else gets PAGE_TOKEN_INVALID.
final class DeckPages: Sendable {
    private let decks = NIOLockedValueBox([String: HeldDeck]())
    let lifetime: Duration
    let capacity: Int

    init(lifetime: Duration = .seconds(900), capacity: Int = 100_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// Holds a deck and returns its token.
    func hold(_ deck: HeldDeck) -> String {
        var bytes = [UInt8](repeating: 0, count: 18)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        let token = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
        var deck = deck
        deck.expires = ContinuousClock.now + self.lifetime
        self.decks.withLockedValue { decks in
            if decks.count >= self.capacity {
                let now = ContinuousClock.now
                decks = decks.filter { $0.value.expires > now }
                if decks.count >= self.capacity, let oldest = decks.min(by: { $0.value.expires < $1.value.expires }) {
                    decks[oldest.key] = nil
                }
            }
            decks[token] = deck
        }
        return token
    }

    /// Takes a viewer's held deck out of the cache (nil: unknown, expired or someone else's).
    func take(_ token: String, viewer: UserKey) -> HeldDeck? {
        self.decks.withLockedValue { decks in
            guard let deck = decks[token] else { return nil }
            guard deck.viewer == viewer else { return nil }
            decks[token] = nil
            return deck.expires > ContinuousClock.now ? deck : nil
        }
    }

    var count: Int { self.decks.withLockedValue { $0.count } }
}
