import KindredGRPC
import KindredIdentity

/// The one check for RPCs only certain services may call (DeliverEvents, internal batch reads):
/// the caller must present a valid service token of one of the named services.
///
/// ```swift
/// let caller = try await self.access.requireService(["auth", "profile", "match"], context)
/// ```
public struct ServiceAccess: Sendable {
    public let authenticator: CallerAuthenticator

    public init(authenticator: CallerAuthenticator) {
        self.authenticator = authenticator
    }

    /// The calling service's name; UNAUTHENTICATED without a valid token, PERMISSION_DENIED for a user
    /// token or another service.
    @discardableResult
    public func requireService(_ allowed: Set<String>, _ context: ServerContext) async throws(RPCError) -> String {
        let caller = try await self.authenticator.authenticate(context)
        return try Self.check(caller, allowed: allowed)
    }

    /// The decision alone (no I/O).
    public static func check(_ caller: CallerIdentity, allowed: Set<String>) throws(RPCError) -> String {
        guard caller.isService, let name = caller.serviceName else {
            throw RPCError(.permissionDenied, "Only Kindred services may call this method")
        }
        guard allowed.contains(name) else {
            throw RPCError(.permissionDenied, "This service may not call this method")
        }
        return name
    }
}
