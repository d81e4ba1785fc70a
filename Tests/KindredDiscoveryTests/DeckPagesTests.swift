import Foundation
import Testing

@testable import KindredDiscovery

/// Held decks (issue 12): compact entries, a byte budget as well as a count, the oldest evicted first without a
/// scan of every deck, and tokens that name exactly one held deck.
@Suite("Held deck pages")
struct DeckPagesTests {
    static let viewer = UserKey(high: 1, low: 2)

    static func deck(_ entries: Int, viewer: UserKey = viewer) -> HeldDeck {
        HeldDeck(
            viewer: viewer, community: "c",
            remaining: (0..<entries).map { n in
                HeldEntry(RankedCandidate(match: IndexMatch(slot: Int32(n), user: UserKey(high: 9, low: UInt64(n)), distanceKm: n), score: 0.5))
            },
            radiusKm: 50, widened: false, expires: .now)
    }

    @Test("A held entry takes 24 bytes")
    func compactEntries() {
        #expect(MemoryLayout<HeldEntry>.stride == 24)
        #expect(Self.deck(480).bytes == 480 * 24 + DeckPages.overheadPerDeck)
    }

    @Test("Tokens are 22 base64url characters that name their key, and nothing else parses")
    func tokensRoundTrip() {
        var random = SplitMix(state: 3)
        for key in [DeckPages.Key(high: 0, low: 0), DeckPages.Key(high: .max, low: .max), DeckPages.Key(high: 1 << 63, low: 1)]
            + (0..<500).map({ _ in DeckPages.Key(high: random.next(), low: random.next()) })
        {
            let token = DeckPages.token(key)
            #expect(token.utf8.count == 22)
            #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            #expect(DeckPages.key(token) == key)
        }
        let good = DeckPages.token(DeckPages.Key(high: 5, low: 6))
        for bad in ["", String(good.dropLast()), good + "A", String(good.dropLast()) + "B", String(good.dropLast()) + "=",
                    "+" + String(good.dropFirst()), String(good.dropFirst(2)) + "=="] {
            #expect(DeckPages.key(bad) == nil, "\(bad)")
        }
    }

    @Test("Beyond the byte budget the oldest decks go, and the bytes counted stay within it")
    func byteBudget() {
        let pages = DeckPages(capacity: 1_000_000, byteBudget: 100 * Self.deck(480).bytes)
        var tokens: [String] = []
        for _ in 0..<250 { tokens.append(pages.hold(Self.deck(480))) }
        #expect(pages.count == 100)
        #expect(pages.bytes == 100 * Self.deck(480).bytes)
        #expect(pages.take(tokens[149], viewer: Self.viewer) == nil)  // evicted
        #expect(pages.take(tokens[150], viewer: Self.viewer)?.remaining.count == 480)  // the oldest kept
        #expect(pages.bytes == 99 * Self.deck(480).bytes)
        // Smaller decks: more of them fit.
        for _ in 0..<1000 { _ = pages.hold(Self.deck(20)) }
        #expect(pages.bytes <= 100 * Self.deck(480).bytes)
        #expect(pages.count > 100)
    }

    @Test("The count bound evicts the oldest first; someone else's token gives nothing and keeps the deck")
    func countBound() {
        let pages = DeckPages(capacity: 100)
        let tokens = (0..<300).map { _ in pages.hold(Self.deck(5)) }
        #expect(pages.count == 100)
        #expect(pages.take(tokens[199], viewer: Self.viewer) == nil)
        #expect(pages.take(tokens[200], viewer: UserKey(high: 7, low: 7)) == nil)
        #expect(pages.take(tokens[200], viewer: Self.viewer) != nil)
        #expect(pages.take(tokens[200], viewer: Self.viewer) == nil)  // taken once
    }

    @Test("Holding and taking pages for a long time keeps the eviction queue proportional to the decks held")
    func queueStaysBounded() {
        let pages = DeckPages(capacity: 1000)
        var held: [String] = []
        for n in 0..<50_000 {
            held.append(pages.hold(Self.deck(3)))
            // Most decks are paged on at once (taken and held again under a new token), a few are left behind.
            if n % 10 != 0, let token = held.popLast() { _ = pages.take(token, viewer: Self.viewer) }
            #expect(pages.queueLength <= 2 * (pages.count + 1) + 64)  // as of the last hold, one deck taken since
        }
        #expect(pages.count >= 999)  // full, less the deck taken last
    }

    @Test("Expired decks are dropped when another is held")
    func expiry() async throws {
        let pages = DeckPages(lifetime: .milliseconds(20), capacity: 100)
        let old = pages.hold(Self.deck(3))
        try await Task.sleep(for: .milliseconds(40))
        _ = pages.hold(Self.deck(3))
        #expect(pages.count == 1)
        #expect(pages.take(old, viewer: Self.viewer) == nil)
    }
}
