/// The newest pending likes digest new likes could join, as the queue holds it. It may take likes only while no
/// sender holds it and no attempt was made yet (no device has it): otherwise they would be folded into a push already
/// on its way, or one some device already showed, and never be told. (A thread's messages follow the same rule in
/// the statement that queues them: ``MessageCollapse``.)
struct WaitingNotification: Sendable, Hashable {
    var id: String
    /// A sender claimed it and has not put it back.
    var claimed: Bool
    /// Attempts made (some device may have it already).
    var attempts: Int

    var takesMore: Bool { !self.claimed && self.attempts == 0 }
}
