/// Everything a swipe needs to know about its swiper, target and pair, loaded for a whole batch by one statement.
struct SwipeFacts: Sendable {
    var swiperCommunity: String?
    var swiperEligible = false
    var swiperDeactivated = false
    var targetCommunity: String?
    var targetEligible = false
    var targetDeactivated = false
    var mode: MatchMode = .mutual
    var dailyLikeLimit = CommunitySettingsRow.defaultDailyLikeLimit
    var pair = PairState()
    var likesUsed = 0
    var oldestLikeUnixMs: Int64?
    /// The pair had a match that ended (and has no active one: `pair.match` is nil).
    var endedMatch = false
}
