import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredProto

/// The one caller check of every service: who is calling (auth's keys and session ends, through
/// ``CallerAuthenticator``) and what they may do. A handler starts with one call that says both:
///
/// ```swift
/// let user = try await self.access.requireUser(context)                       // a signed-in member
/// _ = try await self.access.requireAdmin(context)                              // an admin member
/// _ = try await self.access.requireAdminOrService(context)                     // footprints, listings
/// let producer = try await self.access.requireService(["auth", "profile"], context)  // DeliverEvents
/// ```
///
/// Every service answers the same situation alike (status, `ErrorDetail` reason, message, retry hint): the
/// messages below are the only ones. The decisions are static functions of a ``CallerIdentity`` (no I/O), so
/// they are tested as a table.
public struct ServiceAccess: Sendable {
    public let authenticator: CallerAuthenticator

    public init(authenticator: CallerAuthenticator) {
        self.authenticator = authenticator
    }

    /// The caller's verified identity: UNAUTHENTICATED for a missing, malformed, forged or expired token or an
    /// ended session; UNAVAILABLE with a retry hint while no signing key was fetched yet or session ends cannot be
    /// checked (the revocation feed is stale: fail closed).
    public func authenticate(_ context: ServerContext) async throws(RPCError) -> CallerIdentity {
        try await self.authenticate(authorization: context.metadata["authorization"])
    }

    /// ``authenticate(_:)`` of a call's `authorization` header.
    public func authenticate(authorization header: String?) async throws(RPCError) -> CallerIdentity {
        guard let header else { throw Self.unauthenticated }
        do {
            return try await self.authenticator.authenticate(authorization: header)
        } catch where error.code == .unavailable {
            throw self.authenticator.hasKeys ? Self.sessionCheckUnavailable : Self.keysUnavailable
        } catch {
            throw Self.unauthenticated
        }
    }

    /// A signed-in member (a user token with its community); PERMISSION_DENIED for a service token.
    public func requireUser(_ context: ServerContext) async throws(RPCError) -> SignedInUser {
        try Self.user(try await self.authenticate(context))
    }

    /// A signed-in member with the admin role.
    @discardableResult
    public func requireAdmin(_ context: ServerContext) async throws(RPCError) -> SignedInUser {
        try Self.admin(try await self.authenticate(context))
    }

    /// An admin member, or a service (any service, or only those in `services`).
    @discardableResult
    public func requireAdminOrService(
        _ context: ServerContext,
        services: Set<String>? = nil
    ) async throws(RPCError) -> CallerIdentity {
        let caller = try await self.authenticate(context)
        try Self.checkAdminOrService(caller, services: services)
        return caller
    }

    /// The calling service's name; UNAUTHENTICATED without a valid token, PERMISSION_DENIED for a user
    /// token or another service.
    @discardableResult
    public func requireService(_ allowed: Set<String>, _ context: ServerContext) async throws(RPCError) -> String {
        try Self.check(try await self.authenticate(context), allowed: allowed)
    }

    /// Any service (a stream every service follows, such as WatchRevokedSessions); PERMISSION_DENIED for a user.
    @discardableResult
    public func requireService(_ context: ServerContext) async throws(RPCError) -> String {
        let caller = try await self.authenticate(context)
        guard caller.isService, let name = caller.serviceName else {
            throw Self.denied("Only Kindred services may call this method")
        }
        return name
    }

    /// The viewer of a read that members and services make: a member reads as themself (`requested` empty or
    /// their own id, else PERMISSION_DENIED); a service (any, or one of `services`) names the viewer in
    /// `requested` (INVALID_ARGUMENT on `viewer_user_id` unless it is a user id).
    public func requireViewer(
        _ requested: String,
        _ context: ServerContext,
        services: Set<String>? = nil
    ) async throws(RPCError) -> CallViewer {
        try Self.viewer(requested, of: try await self.authenticate(context), services: services)
    }

    // MARK: Decisions (no I/O)

    public static func viewer(
        _ requested: String,
        of caller: CallerIdentity,
        services: Set<String>? = nil
    ) throws(RPCError) -> CallViewer {
        if caller.isService, let name = caller.serviceName {
            if let services { _ = try Self.check(caller, allowed: services) }
            let id = requested.lowercased()
            guard UUIDv7.isValid(id) else {
                throw RPCError.detailed(
                    .invalidArgument, "The request is invalid", reason: "INVALID_ARGUMENT",
                    violations: [.init(field: "viewer_user_id", reason: "INVALID_FORMAT", hint: "a user id")])
            }
            return CallViewer(id: id, service: name, community: nil)
        }
        guard let id = caller.userID?.lowercased(), UUIDv7.isValid(id) else {
            throw Self.denied("A user or service access token is required")
        }
        guard requested.isEmpty || requested.lowercased() == id else {
            throw Self.denied("Not allowed for this caller")
        }
        return CallViewer(id: id, service: nil, community: caller.claims.cid)
    }


    /// The member behind a user token; PERMISSION_DENIED for a service token or a token without a community
    /// (auth puts the member's community in every user token).
    public static func user(_ caller: CallerIdentity) throws(RPCError) -> SignedInUser {
        guard let id = caller.userID, let community = caller.claims.cid, !community.isEmpty else {
            throw Self.denied("A user access token is required")
        }
        return SignedInUser(id: id.lowercased(), community: community, identity: caller)
    }

    /// The member behind a user token with the admin role.
    public static func admin(_ caller: CallerIdentity) throws(RPCError) -> SignedInUser {
        let user = try Self.user(caller)
        guard user.isAdmin else { throw Self.denied("This call needs the admin role") }
        return user
    }

    /// Passes an admin member or a service (in `services`, when given).
    public static func checkAdminOrService(_ caller: CallerIdentity, services: Set<String>? = nil) throws(RPCError) {
        if caller.isService {
            if let services { _ = try Self.check(caller, allowed: services) }
            return
        }
        guard caller.userID != nil, caller.isAdmin else { throw Self.denied("Admins and services only") }
    }

    /// The service's name if it is one of `allowed`.
    public static func check(_ caller: CallerIdentity, allowed: Set<String>) throws(RPCError) -> String {
        guard caller.isService, let name = caller.serviceName else {
            throw Self.denied("Only Kindred services may call this method")
        }
        guard allowed.contains(name) else { throw Self.denied("This service may not call this method") }
        return name
    }

    // MARK: Answers

    /// No valid token, or its session has ended.
    public static var unauthenticated: RPCError {
        RPCError.detailed(.unauthenticated, "A valid access token is required", reason: "UNAUTHENTICATED")
    }

    /// Session ends cannot be checked now: the caller retries after the hint.
    public static var sessionCheckUnavailable: RPCError {
        RPCError.detailed(
            .unavailable, CallerAuthenticator.sessionCheckUnavailable, reason: "UNAVAILABLE",
            retryAfter: .seconds(1))
    }

    /// Auth's signing keys were never fetched yet (the service just started): the caller retries after the hint.
    public static var keysUnavailable: RPCError {
        RPCError.detailed(
            .unavailable, CallerAuthenticator.keysUnavailable, reason: "UNAVAILABLE", retryAfter: .seconds(1))
    }

    /// PERMISSION_DENIED with `message` (a fixed text).
    public static func denied(_ message: String) -> RPCError {
        RPCError.detailed(.permissionDenied, message, reason: "PERMISSION_DENIED")
    }
}
