import Foundation
import KindredIdentity
import KindredServiceKit
import Synchronization

/// The members' access tokens, signed with the cluster's key and signed again once they are older than
/// `renewAfter` (an access token lives at most 15 minutes; a soak runs for hours).
final class MemberTokens: Sendable {
    private struct Signed {
        var tokens: [String]
        var signedAt: ContinuousClock.Instant
    }

    let members: [String]
    private let signer: AccessTokenSigner
    private let community: String
    private let renewAfter: Duration
    private let state: Mutex<Signed>

    init(members: [String], signer: AccessTokenSigner, community: String, renewAfter: Duration = .seconds(600)) throws {
        self.members = members
        self.signer = signer
        self.community = community
        self.renewAfter = renewAfter
        self.state = Mutex(Signed(tokens: [], signedAt: .now))
        let tokens = try self.signAll()
        self.state.withLock { $0.tokens = tokens }
    }

    /// Member `index`'s current token.
    subscript(index: Int) -> String {
        self.state.withLock { state in
            if ContinuousClock.now - state.signedAt > self.renewAfter, let tokens = try? self.signAll() {
                state = Signed(tokens: tokens, signedAt: .now)
            }
            return state.tokens[index]
        }
    }

    /// Every member's current token (setup).
    var all: [String] { self.members.indices.map { self[$0] } }

    private func signAll() throws -> [String] {
        try self.members.map { member in
            try self.signer.sign(
                AccessTokenClaims(
                    subject: member, issuedAt: Int64(Date().timeIntervalSince1970), lifetimeSeconds: 900,
                    tokenID: try UUIDv7.generate(), sessionID: try UUIDv7.generate(), communityID: self.community,
                    roles: ["user"]))
        }
    }
}
