import KindredProto
import KindredServiceKit

/// The decisions of one group-committed batch of swipes, without I/O: given each command and the facts loaded
/// for it (under the pairs' locks), what to answer and what to write. Commands are applied in order, each seeing
/// the effects of the earlier ones of the same batch (two swipes of one pair in one batch, a swiper's likes
/// counted against their daily limit).
struct SwipeBatch {
    /// Per command: the reply, or the error to answer with (nothing written for it).
    var outcomes: [Result<SwipeReply, MatchError>] = []
    var newSwipes: [SwipeStore.NewSwipe] = []
    var newMatches: [SwipeStore.NewMatch] = []
    var reciprocated: [MatchRecord] = []
    var events: [Kindred.Common.V1.Event] = []

    /// Swipes and matches decided earlier in this batch, which the loaded facts do not show yet.
    private var swipesInBatch: [String: SwipeRecord] = [:]
    private var matchesInBatch: [String: MatchRecord?] = [:]
    private var budgets: [String: LikeBudget] = [:]

    /// - Parameter ids: fresh UUIDv7s (a swipe id and a match id per command).
    init(commands: [SwipeCommand], facts: [SwipeFacts], nowUnixMs: Int64, ids: () throws -> String) rethrows {
        for (command, facts) in zip(commands, facts) {
            self.outcomes.append(try self.apply(command, facts, nowUnixMs: nowUnixMs, ids: ids))
        }
    }

    /// How the swiper stands to the target, from the loaded facts and the pair as this batch left it. Blocks count
    /// either way: the swipe answers the same whoever blocked. Within preferences: discovery said the swiper's deck
    /// could show the target (`SwipeCommand.deckCouldShow`), or the swiper already swiped them — a retry replays
    /// (the swipe rules answer it) even if the target changed their preferences since — or the target liked the
    /// swiper: their like landed within the deck's reach, the swiper sees it in likes received, and liking back
    /// must make the match even where the swiper's own radius is narrower than the distance (a deck widens its
    /// radius; the check does not). A pass on the swiper counts for nothing here, so it stays invisible.
    static func relation(of command: SwipeCommand, _ facts: SwipeFacts, pair: PairState) -> MemberRelation {
        let match: MemberRelation.Facts.Match =
            if let active = pair.match { active.mode == .mutual ? .matched : .connected }
            else if facts.endedMatch { .ended } else { .none }
        return MemberRelation(
            MemberRelation.Facts(
                exists: facts.targetCommunity != nil, sameCommunity: facts.targetCommunity == command.community,
                deactivated: facts.targetDeactivated, eligible: facts.targetEligible,
                withinPreferences: command.deckCouldShow || pair.mine != nil || pair.theirs == .like,
                blockedByMember: pair.blocked,
                match: match))
    }

    private static func key(_ a: String, _ b: String) -> String { a + "|" + b }
    private static func pairKey(_ a: String, _ b: String) -> String { a < b ? a + "|" + b : b + "|" + a }

    private mutating func apply(
        _ command: SwipeCommand,
        _ facts: SwipeFacts,
        nowUnixMs: Int64,
        ids: () throws -> String
    ) rethrows -> Result<SwipeReply, MatchError> {
        // The swiper: an eligible, active profile in the token's community.
        guard facts.swiperCommunity == command.community, facts.swiperEligible, !facts.swiperDeactivated else {
            return .failure(MatchError(.profileRequired, "Complete your profile before swiping"))
        }
        var pair = facts.pair
        if let mine = self.swipesInBatch[Self.key(command.swiper, command.target)] { pair.mine = mine }
        if let theirs = self.swipesInBatch[Self.key(command.target, command.swiper)] { pair.theirs = theirs.kind }
        if let match = self.matchesInBatch[Self.pairKey(command.swiper, command.target)] { pair.match = match }
        // The target: what the policy lets the swiper do (``VisibilityPolicy``: swipe), else exactly as unknown.
        guard VisibilityPolicy.allows(.swipe, Self.relation(of: command, facts, pair: pair)) else {
            return .failure(MatchError.userNotFound)
        }
        var budget =
            self.budgets[command.swiper]
            ?? LikeBudget(limit: facts.dailyLikeLimit, used: facts.likesUsed, oldestUnixMs: facts.oldestLikeUnixMs)

        let before = pair
        // Ids are made only when the swipe (or a match) is new.
        let swipeID = try ids()
        var matchID: String?
        if command.kind == .like, pair.mine == nil, !pair.blocked { matchID = try ids() }
        let action = pair.swipe(
            command.kind, actor: command.swiper, other: command.target, mode: facts.mode,
            swipeID: { swipeID }, matchID: { matchID ?? "" }, nowUnixMs: nowUnixMs)
        switch action {
        case .invisible:
            return .failure(MatchError.userNotFound)
        case .alreadySwiped:
            return .failure(MatchError(.alreadySwiped, "You already swiped on this person"))
        case .replay(let record):
            let match = before.match.flatMap { $0.id == record.matchID ? $0 : nil }
            return .success(SwipeReply(swipe: record, match: match, replayed: true, remainingLikes: budget.remaining))
        case .record(let record, let created, let reciprocated):
            if record.kind == .like, let reset = budget.take(nowUnixMs: nowUnixMs) {
                return .failure(
                    MatchError(
                        .likeLimit, "Daily like limit reached; try again later",
                        retryAfter: .milliseconds(max(1, reset - nowUnixMs))))
            }
            self.budgets[command.swiper] = budget
            self.swipesInBatch[Self.key(command.swiper, command.target)] = record
            self.matchesInBatch[Self.pairKey(command.swiper, command.target)] = .some(pair.match)
            self.newSwipes.append(SwipeStore.NewSwipe(command: command, record: record))

            var recorded = Kindred.Common.V1.Event()
            recorded.userId = command.swiper
            recorded.communityId = command.community
            recorded.occurredUnixMs = nowUnixMs
            recorded.payload = .swipeRecorded(
                .with {
                    $0.swipeId = record.id
                    $0.targetUserId = command.target
                    $0.action = record.kind == .like ? .like : .pass
                    $0.surface = command.surface
                    $0.swipedUnixMs = nowUnixMs
                })
            self.events.append(recorded)
            if let created {
                self.newMatches.append(
                    SwipeStore.NewMatch(a: command.swiper, b: command.target, community: command.community, record: created))
                var event = Kindred.Common.V1.Event()
                event.userId = command.swiper
                event.communityId = command.community
                event.occurredUnixMs = nowUnixMs
                event.payload = .matchCreated(
                    .with {
                        $0.matchId = created.id
                        $0.userIds = [command.swiper, command.target].sorted()
                        $0.initiatorUserId = created.initiator
                        $0.mode = created.mode == .mutual ? .mutual : .oneWay
                        $0.createdUnixMs = created.createdUnixMs
                    })
                self.events.append(event)
            }
            if let reciprocated { self.reciprocated.append(reciprocated) }
            return .success(
                SwipeReply(swipe: record, match: pair.match, replayed: false, remainingLikes: budget.remaining))
        }
    }
}
