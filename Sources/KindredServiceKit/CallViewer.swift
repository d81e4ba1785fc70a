import KindredIdentity

/// Whose view a read is for, as ``ServiceAccess/requireViewer(_:_:services:)`` found it: a member reading as
/// themself, or a service naming the member (`viewer_user_id`).
public struct CallViewer: Hashable, Sendable {
    /// The viewer's user id, lower-case.
    public let id: String
    /// The calling service, or nil when the member reads as themself.
    public let service: String?
    /// The member's community when they call themself (their token's `cid`); nil when a service names them.
    public let community: String?

    public init(id: String, service: String?, community: String?) {
        self.id = id
        self.service = service
        self.community = community
    }

    /// A service asks for the viewer (it may see decisions of the other side that it never shows them).
    public var isService: Bool { self.service != nil }
}
