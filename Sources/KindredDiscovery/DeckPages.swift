import Foundation
import NIOConcurrencyHelpers

/// The server-side cache of ranked decks behind deck tokens: an opaque random token names the rest of a ranking
/// for 15 minutes, so later pages continue it without repeating anyone (and without ranking again). Bounded by
/// a count and by bytes (`KINDRED_DISCOVERY_HELD_DECKS`, `_HELD_DECK_MIB`): the oldest decks go first, in O(1)
/// amortized per insertion (a queue in insertion order, which is expiry order: every deck lives as long). A
/// token belongs to its viewer: anyone else gets PAGE_TOKEN_INVALID.
final class DeckPages: Sendable {
    /// A token's 128 random bits.
    struct Key: Hashable, Sendable {
        var high: UInt64
        var low: UInt64
    }

    private struct Store {
        var decks: [Key: HeldDeck] = [:]
        /// Keys in insertion order from `head` on; keys of decks already taken are skipped (and dropped when the
        /// queue grows past twice the decks held).
        var order: [Key] = []
        var head = 0
        var bytes = 0
    }

    static let overheadPerDeck = 160

    private let store = NIOLockedValueBox(Store())
    let lifetime: Duration
    let capacity: Int
    let byteBudget: Int

    init(lifetime: Duration = .seconds(900), capacity: Int = 100_000, byteBudget: Int = 256 << 20) {
        self.lifetime = lifetime
        self.capacity = capacity
        self.byteBudget = byteBudget
    }

    /// Holds a deck and returns its token.
    func hold(_ deck: HeldDeck) -> String {
        var generator = SystemRandomNumberGenerator()
        let key = Key(high: generator.next(), low: generator.next())
        var deck = deck
        let now = ContinuousClock.now
        deck.expires = now + self.lifetime
        self.store.withLockedValue { store in
            store.decks[key] = deck
            store.order.append(key)
            store.bytes += deck.bytes
            self.evict(&store, now: now)
        }
        return Self.token(key)
    }

    /// Drops expired decks and the oldest while over the count or the byte budget.
    private func evict(_ store: inout Store, now: ContinuousClock.Instant) {
        while store.head < store.order.count {
            let oldest = store.order[store.head]
            if let deck = store.decks[oldest] {
                guard deck.expires <= now || store.decks.count > self.capacity || store.bytes > self.byteBudget else { break }
                store.decks[oldest] = nil
                store.bytes -= deck.bytes
            }
            store.head += 1
        }
        if store.order.count - store.head > 2 * store.decks.count + 64 {
            // Mostly taken decks' keys: keep the live ones, in order (amortized O(1): half the queue goes).
            store.order = store.order[store.head...].filter { store.decks[$0] != nil }
            store.head = 0
        } else if store.head > 4096, store.head * 2 > store.order.count {
            store.order.removeFirst(store.head)
            store.head = 0
        }
    }

    /// Takes a viewer's held deck out of the cache (nil: unknown, malformed, expired or someone else's).
    func take(_ token: String, viewer: UserKey) -> HeldDeck? {
        guard let key = Self.key(token) else { return nil }
        return self.store.withLockedValue { store in
            guard let deck = store.decks[key], deck.viewer == viewer else { return nil }
            store.decks[key] = nil
            store.bytes -= deck.bytes
            return deck.expires > ContinuousClock.now ? deck : nil
        }
    }

    var count: Int { self.store.withLockedValue { $0.decks.count } }

    /// Bytes the held decks take (as `HeldDeck.bytes` counts them).
    var bytes: Int { self.store.withLockedValue { $0.bytes } }

    /// The queue's length (tests: it stays proportional to the decks held).
    var queueLength: Int { self.store.withLockedValue { $0.order.count - $0.head } }

    /// 22 characters of base64url (no padding).
    static func token(_ key: Key) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(22)
        // 128 bits as 21 groups of 6 and a final 2.
        for i in 0..<22 {
            let bit = i * 6
            let value: UInt64
            if bit + 6 <= 64 {
                value = key.high >> UInt64(58 - bit) & 63
            } else if bit < 64 {
                value = (key.high << UInt64(bit + 6 - 64) | key.low >> UInt64(128 - bit - 6)) & 63
            } else if bit + 6 <= 128 {
                value = key.low >> UInt64(122 - bit) & 63
            } else {
                value = key.low << UInt64(bit + 6 - 128) & 63
            }
            out.append(alphabet[Int(value)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The key a token names (nil: not one of ours).
    static func key(_ token: String) -> Key? {
        let utf8 = Array(token.utf8)
        guard utf8.count == 22 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (i, character) in utf8.enumerated() {
            let value: UInt64
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt64(character - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt64(character - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt64(character - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            if i == 21 {
                guard value & 15 == 0 else { return nil }  // the 4 bits past 128 are zero in a token we made
                high = high << 2 | low >> 62
                low = low << 2 | value >> 4
            } else {
                // Shift the 128-bit (high, low) left by 6 and add the value.
                high = high << 6 | low >> 58
                low = low << 6 | value
            }
        }
        return Key(high: high, low: low)
    }
}
