import Foundation
import KindredServiceKit

/// A compatible candidate found by the index.
public struct IndexMatch: Sendable, Equatable {
    public var slot: Int32
    public var user: UserKey
    /// Coarse km between cell centres, floor 1.
    public var distanceKm: Int
}
