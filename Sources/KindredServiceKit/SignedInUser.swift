import KindredIdentity

/// The member a call is made by, as ``ServiceAccess/requireUser(_:)`` found them in a verified user token.
public struct SignedInUser: Hashable, Sendable {
    /// The user id, lower-case.
    public let id: String
    /// The member's community (the token's `cid`).
    public let community: String
    /// The verified token.
    public let identity: CallerIdentity

    public init(id: String, community: String, identity: CallerIdentity) {
        self.id = id
        self.community = community
        self.identity = identity
    }

    /// The token's session (auth issues every user token in one).
    public var sessionID: String? { self.identity.sessionID }
    public var isAdmin: Bool { self.identity.isAdmin }
}
