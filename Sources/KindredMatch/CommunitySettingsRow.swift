import KindredProto

/// The settings of a community as match stores them.
struct CommunitySettingsRow: Sendable, Hashable {
    static let defaultDailyLikeLimit = 200
    static let defaultUndoWindowSeconds = 300
    static let defaultDailyUndoLimit = 3
    /// Until profile's CommunityUpdated arrives: mutual mode and the contract's default limits.
    static let defaults = CommunitySettingsRow(
        mode: .mutual, dailyLikeLimit: defaultDailyLikeLimit, undoWindowSeconds: defaultUndoWindowSeconds,
        dailyUndoLimit: defaultDailyUndoLimit)
    /// The attribute whose values name the activities of a broadcast (the fitness preset's "activities").
    static let activitiesAttribute = "activities"

    var mode: MatchMode
    var dailyLikeLimit: Int
    var undoWindowSeconds: Int
    var dailyUndoLimit: Int
    /// The values of the community's "activities" attribute: what StartActivity accepts (empty: none named).
    var activities: [String] = []

    /// From a CommunityUpdated snapshot: an unset mode is mutual, an unset (0) like limit the default; undo
    /// window and undo limit are taken as they are (0 disables undo).
    init(_ settings: Kindred.Common.V1.CommunitySettings) {
        self.mode = settings.mode == .oneWay ? .oneWay : .mutual
        self.dailyLikeLimit = settings.dailyLikeLimit > 0 ? Int(settings.dailyLikeLimit) : Self.defaultDailyLikeLimit
        self.undoWindowSeconds = Int(max(0, settings.undoWindowSeconds))
        self.dailyUndoLimit = Int(max(0, settings.dailyUndoLimit))
        self.activities =
            settings.attributeDefinitions.first { $0.key == Self.activitiesAttribute }?.choices.map(\.value) ?? []
    }

    init(mode: MatchMode, dailyLikeLimit: Int, undoWindowSeconds: Int, dailyUndoLimit: Int, activities: [String] = []) {
        self.mode = mode
        self.dailyLikeLimit = dailyLikeLimit
        self.undoWindowSeconds = undoWindowSeconds
        self.dailyUndoLimit = dailyUndoLimit
        self.activities = activities
    }
}
