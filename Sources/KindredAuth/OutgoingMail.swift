/// A mail to queue: written to `mail_outbox` in the transaction of the change that causes it.
struct OutgoingMail: Sendable {
    /// Which text this is (kept after delivery, when the body is erased).
    var template: String
    var recipient: String
    var subject: String
    var body: String
}
