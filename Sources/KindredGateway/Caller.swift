import KindredGRPC
import KindredIdentity

/// Who may call an RPC of the public API.
enum Access: Sendable {
    /// No token needed (sign-up, sign-in, refresh, reset, verification...). A stricter per-address bucket
    /// applies.
    case anyone
    /// A token is forwarded when present but not required (SignOut with only a refresh token).
    case tokenOptional
    /// A verified user access token.
    case user
    /// A verified user access token with the admin role.
    case admin
}

/// The admitted caller of one call: their verified identity (when the RPC needs one) and what the gateway
/// forwards to the services.
struct Caller: Sendable {
    let identity: CallerIdentity?
    let clientAddress: String
    /// `authorization` (the caller's own token, verified or, for `.tokenOptional`, as sent) and
    /// `x-kindred-client-ip`.
    let forwardedMetadata: Metadata

    var userID: String? { self.identity?.userID }
}
