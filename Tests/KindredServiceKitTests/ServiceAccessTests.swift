import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredServiceKit
import Testing

/// The one caller check every service uses: who may pass each check, and the one answer (status, reason,
/// message, retry hint) for each refusal.
@Suite struct ServiceAccessTests {
    static let member = "0190a000-0000-7000-8000-000000000001"
    static let other = "0190a000-0000-7000-8000-000000000002"

    /// A verified caller of the shape auth issues (a member token carries its community).
    static func caller(_ subject: String, roles: [String], community: String? = nil) async throws -> CallerIdentity {
        let claims = AccessTokenClaims(
            subject: subject, issuedAt: Int64(Date().timeIntervalSince1970), lifetimeSeconds: 300,
            tokenID: try UUIDv7.generate(), sessionID: subject.hasPrefix("service:") ? nil : try UUIDv7.generate(),
            communityID: community, roles: roles)
        let token = try AccessTokenSigner(keyID: TestIdentity.keyID, key: TestIdentity.key).sign(claims)
        return try await TestIdentity.authenticator.authenticate(authorization: "Bearer " + token)
    }

    enum Who: String, CaseIterable, Sendable {
        case member, memberWithoutCommunity, admin, gateway, match, serviceWithoutRole
    }

    static func identity(_ who: Who) async throws -> CallerIdentity {
        switch who {
        case .member: try await Self.caller(Self.member.uppercased(), roles: ["user"], community: "dating")
        case .memberWithoutCommunity: try await Self.caller(Self.member, roles: ["user"])
        case .admin: try await Self.caller(Self.member, roles: ["user", "admin"], community: "dating")
        case .gateway: try await Self.caller("service:gateway", roles: ["service"])
        case .match: try await Self.caller("service:match", roles: ["service"])
        case .serviceWithoutRole: try await Self.caller("service:match", roles: ["user"], community: "dating")
        }
    }

    /// Caller → passes requireUser, requireAdmin, requireAdminOrService (any), requireAdminOrService(["gateway"]).
    static let decisions: [(Who, Bool, Bool, Bool, Bool)] = [
        (.member, true, false, false, false),
        (.memberWithoutCommunity, false, false, false, false),
        (.admin, true, true, true, true),
        (.gateway, false, false, true, true),
        (.match, false, false, true, false),
        (.serviceWithoutRole, false, false, false, false),
    ]

    @Test(arguments: Self.decisions)
    func whoPassesWhichCheck(who: Who, user: Bool, admin: Bool, adminOrService: Bool, adminOrGateway: Bool)
        async throws
    {
        let caller = try await Self.identity(who)
        let refusals = [
            Self.denial { () throws(RPCError) in _ = try ServiceAccess.user(caller) },
            Self.denial { () throws(RPCError) in _ = try ServiceAccess.admin(caller) },
            Self.denial { () throws(RPCError) in try ServiceAccess.checkAdminOrService(caller) },
            Self.denial { () throws(RPCError) in try ServiceAccess.checkAdminOrService(caller, services: ["gateway"]) },
        ]
        let expected = [user, admin, adminOrService, adminOrGateway].map { $0 ? nil : StatusCode.permissionDenied }
        #expect(refusals == expected)
    }

    @Test func aMemberIsNamedByTheLowerCaseIdWithTheirCommunity() async throws {
        let user = try ServiceAccess.user(try await Self.identity(.member))
        #expect(user.id == Self.member)
        #expect(user.community == "dating")
        #expect(user.sessionID != nil && !user.isAdmin)
    }

    /// Caller, requested viewer, services allowed → the viewer id and whether a service asks, or the refusal.
    static let viewers: [(Who, String, Set<String>?, String?, StatusCode?)] = [
        (.member, "", nil, member, nil),
        (.member, member.uppercased(), nil, member, nil),
        (.member, other, nil, nil, .permissionDenied),  // a member reads only as themself
        (.gateway, other.uppercased(), ["gateway"], other, nil),
        (.gateway, "", ["gateway"], nil, .invalidArgument),  // a service must name the viewer
        (.gateway, "not-a-user", nil, nil, .invalidArgument),
        (.match, other, ["gateway"], nil, .permissionDenied),
        (.match, other, nil, other, nil),
    ]

    @Test(arguments: Self.viewers)
    func theViewerOfARead(who: Who, requested: String, services: Set<String>?, id: String?, refusal: StatusCode?)
        async throws
    {
        let caller = try await Self.identity(who)
        do {
            let viewer = try ServiceAccess.viewer(requested, of: caller, services: services)
            #expect(viewer.id == id && refusal == nil)
            #expect(viewer.isService == caller.isService)
            #expect(viewer.community == (caller.isService ? nil : "dating"))
        } catch {
            #expect(error.code == refusal && id == nil)
            if error.code == .invalidArgument {
                #expect(error.errorDetail?.fieldViolations.map(\.field) == ["viewer_user_id"])
            }
        }
    }

    /// Every service answers a missing or bad token, and a stale revocation feed, with the same status, reason,
    /// message and retry hint.
    @Test func theAnswersToNoCallerAreTheSameEverywhere() async throws {
        let stale = CallerAuthenticator(
            keys: [TestIdentity.keyID: TestIdentity.key.publicKey],
            revocations: RevokedSessions(staleAfter: .seconds(1)))
        let access = ServiceAccess(authenticator: stale)
        let member = try AccessTokenSigner(keyID: TestIdentity.keyID, key: TestIdentity.key).sign(
            AccessTokenClaims(
                subject: Self.member, issuedAt: Int64(Date().timeIntervalSince1970), lifetimeSeconds: 300,
                tokenID: try UUIDv7.generate(), sessionID: try UUIDv7.generate(), communityID: "dating",
                roles: ["user"]))
        let cases: [(String?, StatusCode, String, String, Int64)] = [
            (nil, .unauthenticated, "UNAUTHENTICATED", "A valid access token is required", 0),
            ("Bearer not-a-token", .unauthenticated, "UNAUTHENTICATED", "A valid access token is required", 0),
            ("Basic abc", .unauthenticated, "UNAUTHENTICATED", "A valid access token is required", 0),
            ("Bearer " + member, .unavailable, "UNAVAILABLE", CallerAuthenticator.sessionCheckUnavailable, 1000),
        ]
        for (header, code, reason, message, retryAfterMs) in cases {
            do {
                _ = try await access.authenticate(authorization: header)
                Issue.record("\(header ?? "no header") passed")
            } catch {
                #expect(error.code == code)
                #expect(error.message == message)
                #expect(error.errorDetail?.reason == reason)
                #expect(error.errorDetail?.retryAfterMs ?? 0 == retryAfterMs)
            }
        }
    }

    static func denial(_ body: () throws(RPCError) -> Void) -> StatusCode? {
        do {
            try body()
            return nil
        } catch {
            #expect(error.errorDetail?.reason == "PERMISSION_DENIED")
            return error.code
        }
    }
}
