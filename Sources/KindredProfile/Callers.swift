import KindredGRPC
import KindredIdentity

/// Who is calling, verified in the service itself (auth's keys and session ends, as every service does).
struct Callers: Sendable {
    let authenticator: CallerAuthenticator

    /// The verified caller: UNAUTHENTICATED for a missing, invalid or expired token or an ended session;
    /// UNAVAILABLE while session ends cannot be checked.
    func identify(_ context: ServerContext) async throws(ProfileError) -> CallerIdentity {
        do {
            return try await self.authenticator.authenticate(context)
        } catch where error.code == .unavailable {
            throw ProfileError(.unavailable, "UNAVAILABLE", CallerAuthenticator.sessionCheckUnavailable)
        } catch {
            throw ProfileError.unauthenticated
        }
    }

    /// A signed-in user (not a service) and their community (the token's `cid`).
    func user(_ context: ServerContext) async throws(ProfileError) -> (identity: CallerIdentity, userID: String, community: String) {
        let identity = try await self.identify(context)
        guard let userID = identity.userID, let community = identity.claims.cid, !community.isEmpty else {
            throw ProfileError(.permissionDenied, "PERMISSION_DENIED", "A user access token is required")
        }
        return (identity, userID, community)
    }

    /// An admin user.
    func admin(_ context: ServerContext) async throws(ProfileError) -> CallerIdentity {
        let identity = try await self.identify(context)
        guard identity.userID != nil, identity.isAdmin else { throw ProfileError.adminOnly }
        return identity
    }
}
