import Foundation
import KindredGRPC
import KindredProto
import KindredServiceKit

/// A ranking drawn for a viewer: the candidates best first and the radius they came from.
struct DrawnDeck {
    var ranked: [RankedCandidate]
    var radiusKm: Int
    var widened: Bool
}

extension DiscoveryService {
    /// `GetDeck`: the next page of the viewer's ranked deck. The first page draws and ranks a pool (widening the
    /// radius in steps when the viewer's own runs dry) and holds it behind a deck token; later pages continue
    /// it, skipping anyone swiped or blocked meanwhile, so pages never repeat.
    func getDeck(_ request: DiscoveryApi.GetDeckRequest, _ context: ServerContext) async throws
        -> DiscoveryApi.GetDeckResponse
    {
        let (viewer, tokenCommunity) = try await self.viewer(request.viewerUserId, context)
        let size = try Self.pageSize(request.pageSize)
        let exclude = try Self.excluded(request.excludeUserIds)
        var deck: HeldDeck
        if !request.pageToken.isEmpty {
            guard let held = self.pages.take(request.pageToken, viewer: viewer) else {
                throw DiscoveryError.invalid("page_token", "PAGE_TOKEN_INVALID", "start again without a token")
            }
            deck = held
        } else {
            let community = try self.community(of: viewer, token: tokenCommunity)
            let start = ContinuousClock.now
            let drawn = try self.draw(viewer, community: community, filters: request.attributeFilters, exclude: exclude)
            let elapsed = (ContinuousClock.now - start).components
            self.deckTimer.recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
            self.deckCounter.increment()
            if drawn.widened { self.widenedCounter.increment() }
            deck = HeldDeck(
                viewer: viewer, community: community, remaining: drawn.ranked.map(HeldEntry.init),
                radiusKm: drawn.radiusKm, widened: drawn.widened, expires: .now)
        }
        // Serve the page, skipping whoever left the deck since it was ranked; only the rest is held again.
        var page: [RankedCandidate] = []
        var served = 0
        self.index.read(deck.community) { state in
            while page.count < size, served < deck.remaining.count {
                let entry = deck.remaining[served]
                served += 1
                guard !exclude.contains(entry.user), state.index.isStillUnseen(viewer: viewer, target: entry.user),
                    let slot = state.index.slot(of: entry.user)
                else { continue }
                page.append(
                    RankedCandidate(match: IndexMatch(slot: slot, user: entry.user, distanceKm: Int(entry.distanceKm)), score: entry.score))
            }
        }
        deck.remaining.removeFirst(served)
        var response = DiscoveryApi.GetDeckResponse()
        response.candidates = self.candidates(page, viewer: viewer, community: deck.community, scored: true)
        response.radiusKm = Int32(deck.radiusKm)
        response.widened = deck.widened
        if !deck.remaining.isEmpty { response.nextPageToken = self.pages.hold(deck) }
        return response
    }

    /// `GetRecommendations`: the top N (default 3) of the viewer's ranking ("top picks").
    func getRecommendations(_ request: DiscoveryApi.GetRecommendationsRequest, _ context: ServerContext) async throws
        -> DiscoveryApi.GetRecommendationsResponse
    {
        let (viewer, tokenCommunity) = try await self.viewer(request.viewerUserId, context)
        let limit = try Self.pageSize(request.limit, field: "limit", default: 3, max: 10)
        let community = try self.community(of: viewer, token: tokenCommunity)
        let drawn = try self.draw(viewer, community: community, filters: [], exclude: [])
        var response = DiscoveryApi.GetRecommendationsResponse()
        response.candidates = self.candidates(
            Array(drawn.ranked.prefix(limit)), viewer: viewer, community: community, scored: true)
        return response
    }

    // MARK: Drawing a deck

    /// What GetDeck computes for a first page after the caller check: the viewer's ranked pool (benchmarks).
    public func rankedDeck(for viewer: UserKey) throws -> (ranked: [RankedCandidate], radiusKm: Int, widened: Bool) {
        let community = try self.community(of: viewer, token: nil)
        let drawn = try self.draw(viewer, community: community, filters: [], exclude: [])
        return (drawn.ranked, drawn.radiusKm, drawn.widened)
    }

    /// Finds and ranks the viewer's pool: the nearest compatible unseen candidates within their radius; when
    /// fewer than a page are found, the radius doubles (capped at the community's maximum) until enough are.
    func draw(
        _ viewer: UserKey, community: String, filters: [CommonApi.AttributeFilter], exclude: Set<UserKey>
    ) throws -> DrawnDeck {
        let poolSize = self.configuration.deckPool
        let scanLimit = self.configuration.scanLimit
        let today = Self.today()
        let nowMinutes = Int32(Self.nowUnixMs / 60_000)
        let drawn: DrawnDeck?? = try self.index.read(community) { state in
            try Self.draw(
                viewer, in: state, filters: filters, exclude: exclude, poolSize: poolSize, scanLimit: scanLimit,
                today: today, nowMinutes: nowMinutes)
        }
        guard let drawn = drawn ?? nil else { throw DiscoveryError(.profileIncomplete, "Your profile is not shown to others yet") }
        return drawn
    }

    /// `draw` inside the read lock: nil when the viewer is not indexed.
    static func draw(
        _ viewer: UserKey, in state: CommunityState, filters: [CommonApi.AttributeFilter], exclude: Set<UserKey>,
        poolSize: Int, scanLimit: Int, today: Int32, nowMinutes: Int32
    ) throws -> DrawnDeck? {
        guard let own = state.index.radiusKm(of: viewer) else { return nil }
        let checked = try Self.filters(filters, rules: state.rules)
        let facts = state.facts
        var accept: (@Sendable (UserKey) -> Bool)? = nil
        if !checked.isEmpty { accept = { @Sendable user in facts[user].map { checked.accepts($0) } ?? false } }
        let maxRadius = state.widestRadius(own: own)
        var radius = own
        var pool: [IndexMatch] = []
        while true {
            let query = DeckQuery(
                limit: poolSize, radiusKm: radius, exclude: exclude, today: today, scanLimit: scanLimit, accept: accept
            ).following(.deck)
            pool = state.index.candidates(for: viewer, query) ?? []
            if pool.count >= 20 || radius >= maxRadius { break }
            radius = min(maxRadius, radius * 2)
        }
        let ranked = state.index.rank(pool, viewer: viewer, recommender: state.recommender, nowMinutes: nowMinutes)
        return DrawnDeck(ranked: ranked, radiusKm: radius, widened: radius > own)
    }

    /// The viewer's community in the index; FAILED_PRECONDITION when the viewer is not indexed (or, for a user,
    /// indexed in another community than their token's).
    func community(of viewer: UserKey, token: String?) throws -> String {
        guard let community = self.index.community(of: viewer), token == nil || token == community else {
            throw DiscoveryError(.profileIncomplete, "Your profile is not shown to others yet")
        }
        return community
    }

    /// Deck filters checked against the community's rules.
    static func filters(_ filters: [CommonApi.AttributeFilter], rules: CommunityRules) throws -> AttributeFilterSet {
        do {
            return try AttributeFilterSet(filters, rules: rules)
        } catch .tooMany {
            throw DiscoveryError.invalid("attribute_filters", "TOO_MANY", "at most 10 filters")
        } catch .notFilterable(let index) {
            throw DiscoveryError.invalid("attribute_filters[\(index)].key", "NOT_FILTERABLE", "a filterable attribute")
        } catch .badCondition(let index) {
            throw DiscoveryError.invalid(
                "attribute_filters[\(index)]", "INVALID_CONDITION", "the condition the attribute's type takes")
        }
    }

    /// The client's held candidates, at most 100 (ids that are not user ids cannot be anyone: ignored).
    static func excluded(_ ids: [String]) throws -> Set<UserKey> {
        guard ids.count <= 100 else {
            throw DiscoveryError.invalid("exclude_user_ids", "TOO_MANY", "at most 100 ids")
        }
        return Set(ids.compactMap { UserKey(uuidString: $0.lowercased()) })
    }

    /// Response entries: coarse km (0 when the candidate hides it) and the filterable attributes both share.
    func candidates(_ entries: [RankedCandidate], viewer: UserKey, community: String, scored: Bool)
        -> [DiscoveryApi.Candidate]
    {
        self.index.read(community) { state in
            let mine = state.facts[viewer] ?? MemberFacts()
            return entries.map { entry in
                var candidate = DiscoveryApi.Candidate()
                candidate.userId = entry.match.user.uuidString
                candidate.score = scored ? entry.score : 0
                candidate.distanceKm = state.index.hidesDistance(entry.match.slot) ? 0 : Int32(entry.match.distanceKm)
                let theirs = state.facts[entry.match.user] ?? MemberFacts()
                candidate.sharedAttributeKeys = Array(
                    mine.values.keys.filter { key in theirs.values[key].map { Self.shares(mine.values[key]!, $0) } ?? false }
                        .sorted().prefix(10))
                return candidate
            }
        } ?? []
    }

    /// Whether two values of one attribute share something (equal, or a common choice).
    static func shares(_ a: CommonApi.AttributeValue.Value, _ b: CommonApi.AttributeValue.Value) -> Bool {
        switch (a, b) {
        case (.choiceValues(let x), .choiceValues(let y)): !Set(x.values).isDisjoint(with: y.values)
        case (.choiceValues(let x), .choiceValue(let y)), (.choiceValue(let y), .choiceValues(let x)): x.values.contains(y)
        default: a == b
        }
    }
}

extension DeckQuery {
    /// The query with whom the walk keeps taken from the policy's `view` (deck or search): the viewer's own swipes
    /// and passes on the viewer. Blocks either way and ended matches the index always leaves out (the policy shows
    /// them nowhere).
    func following(_ view: MemberView) -> DeckQuery {
        var query = self
        query.includeSwiped = VisibilityPolicy.allows(view, .liked) && VisibilityPolicy.allows(view, .passed)
        query.includePassedOn = VisibilityPolicy.allows(view, .passedOn)
        return query
    }
}
