/// The newest pending notification a new item could join (a thread's messages, a member's likes), as the queue
/// holds it. It may take an item only while no sender holds it and no attempt was made yet (no device has it):
/// otherwise the item would be folded into a push already on its way, or one some device already showed, and never
/// be told.
struct WaitingNotification: Sendable, Hashable {
    var id: String
    /// A sender claimed it and has not put it back.
    var claimed: Bool
    /// Attempts made (some device may have it already).
    var attempts: Int

    var takesMore: Bool { !self.claimed && self.attempts == 0 }
}
