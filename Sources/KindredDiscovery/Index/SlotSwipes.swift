import Foundation
import KindredServiceKit

/// Swipes between slots as a rebuild collects them (struct of arrays: 9 bytes a swipe).
public struct SlotSwipes: Sendable {
    public var viewers: [Int32] = []
    public var targets: [Int32] = []
    public var liked: [Bool] = []

    public init() {}

    public var count: Int { viewers.count }

    public mutating func append(viewer: Int32, target: Int32, liked: Bool) {
        viewers.append(viewer)
        targets.append(target)
        self.liked.append(liked)
    }
}
