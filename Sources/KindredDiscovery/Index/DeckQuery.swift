import Foundation
import KindredServiceKit

/// A deck request as the index sees it.
public struct DeckQuery: Sendable {
    /// Candidates wanted.
    public var limit: Int
    /// Radius override (widening, search); nil = the viewer's own.
    public var radiusKm: Int?
    /// Attribute bits every candidate must have (choice filters, ANDed).
    public var requiredAttributes: InterestSet
    /// Users the client still holds (not wanted again).
    public var exclude: Set<UserKey>
    /// Today as yyyymmdd (ages are computed from it).
    public var today: Int32
    /// Members examined at most (bounds the work per deck in dense areas; nearest cells are visited first).
    public var scanLimit: Int
    /// Whether members the viewer already swiped are included (search: the viewer knows their own swipes).
    public var includeSwiped: Bool
    /// Whether members who passed on the viewer are included (search: a pass is never visible to the one
    /// passed on, so only the deck leaves them out). Blocks either way and ended matches always exclude.
    public var includePassedOn: Bool
    /// A further condition on a compatible candidate (attribute filters the bits cannot express).
    public var accept: (@Sendable (UserKey) -> Bool)?

    public init(
        limit: Int, radiusKm: Int? = nil, requiredAttributes: InterestSet = InterestSet(),
        exclude: Set<UserKey> = [], today: Int32, scanLimit: Int = 4000, includeSwiped: Bool = false,
        includePassedOn: Bool = false, accept: (@Sendable (UserKey) -> Bool)? = nil
    ) {
        self.limit = limit
        self.radiusKm = radiusKm
        self.requiredAttributes = requiredAttributes
        self.exclude = exclude
        self.today = today
        self.scanLimit = scanLimit
        self.includeSwiped = includeSwiped
        self.includePassedOn = includePassedOn
        self.accept = accept
    }
}
