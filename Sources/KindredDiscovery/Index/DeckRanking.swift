import Foundation

/// A ranked deck entry.
public struct RankedCandidate: Sendable, Equatable {
    public var match: IndexMatch
    /// P(viewer likes) × P(candidate likes back), 0…1.
    public var score: Float
}

extension CommunityIndex {
    /// Ranks a candidate pool for `viewer` by match likelihood (`MatchScorer`: the viewer's like model forward
    /// times the candidate's own model backward, the reciprocal term; a candidate who already liked the viewer
    /// — in the pool, a swipe on the viewer is a like, passes are left out — has a known backward factor, 1).
    /// `recommender` is indexed by slot.
    /// The viewer's terms are computed once; per candidate: two Jaccards, a taste dot product, two logs and two
    /// exponentials, no allocation. Ties (equal scores) go to the more recently active, then the newer member,
    /// then the smaller user id — the documented freshness tie-breakers.
    public func rank(_ pool: [IndexMatch], viewer: UserKey, recommender: Recommender, nowMinutes: Int32) -> [RankedCandidate] {
        guard let v = slot(of: viewer) else { return [] }
        let vi = Int(v)
        let scorer = recommender.scorer(
            viewer: recommender.state(of: vi), interests: interests[vi], attributes: attributes[vi],
            ageYears: Int(birthYear(vi)), activity: Self.activity(lastActive[vi], nowMinutes))
        let states = recommender.states
        var ranked: [RankedCandidate] = []
        ranked.reserveCapacity(pool.count)
        for match in pool {
            let ci = Int(match.slot)
            let state = ci < states.count ? states[ci] : MemberState()
            let score = scorer.score(
                state, interests: interests[ci], attributes: attributes[ci], ageYears: Int(birthYear(ci)),
                activity: Self.activity(lastActive[ci], nowMinutes), distanceKm: match.distanceKm,
                likedViewer: hasSwiped(slot: match.slot, v))
            ranked.append(RankedCandidate(match: match, score: score))
        }
        ranked.sort { a, b in
            if a.score != b.score { return a.score > b.score }
            let (x, y) = (Int(a.match.slot), Int(b.match.slot))
            if lastActive[x] != lastActive[y] { return lastActive[x] > lastActive[y] }
            if joined[x] != joined[y] { return joined[x] > joined[y] }
            return a.match.user < b.match.user
        }
        return ranked
    }

    /// 1 for active now, halving every 7 days.
    static func activity(_ lastActiveMinutes: Int32, _ nowMinutes: Int32) -> Float {
        let idle = Float(max(0, nowMinutes - lastActiveMinutes))
        return exp2(-idle / (7 * 24 * 60))
    }
}
