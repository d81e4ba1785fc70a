#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import KindredGRPC
import KindredHTTP2
import Logging

/// OAuth 2.0 access tokens for FCM, from the service account's JWT bearer grant (RFC 7523; Google's "Using
/// OAuth 2.0 for Server to Server Applications"): an RS256 assertion (iss = the account, scope = firebase.messaging,
/// aud = the token endpoint, iat, exp one hour later) posted to the token endpoint. The token is reused until
/// `refreshMargin` before it expires; concurrent sends wait for one request instead of each making their own.
actor FCMAccessTokens {
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    /// Why no token could be had.
    enum Failure: Error {
        /// The endpoint could not be reached or failed (5xx, 429): worth trying again soon.
        case unavailable(retryAfter: Duration?)
        /// The endpoint refused the grant (a revoked key, a wrong account): an operator has to act.
        case refused(String)
    }

    private struct Token {
        let value: String
        let expiresAt: Date
    }

    private let account: FCMServiceAccount
    private let client: HTTP2Client
    private let path: String
    private let audience: String
    private let timeout: Duration
    private let refreshMargin: Duration
    private let clock: @Sendable () -> Date
    private let logger: Logger
    private var token: Token?
    private var pending: Task<Token, any Error>?

    init(
        account: FCMServiceAccount,
        client: HTTP2Client,
        tokenURL: String,
        path: String,
        timeout: Duration,
        refreshMargin: Duration,
        clock: @escaping @Sendable () -> Date,
        logger: Logger
    ) {
        self.account = account
        self.client = client
        self.audience = tokenURL
        self.path = path
        self.timeout = timeout
        self.refreshMargin = refreshMargin
        self.clock = clock
        self.logger = logger
    }

    /// A token valid for at least `refreshMargin` more.
    func current() async throws(Failure) -> String {
        let margin = TimeInterval(self.refreshMargin.components.seconds)
        if let token = self.token, token.expiresAt.timeIntervalSince(self.clock()) > margin {
            return token.value
        }
        let task: Task<Token, any Error>
        if let pending = self.pending {
            task = pending
        } else {
            task = Task { try await self.fetch() }
            self.pending = task
        }
        do {
            let token = try await task.value
            if self.pending == task { self.pending = nil }
            self.token = token
            return token.value
        } catch {
            if self.pending == task { self.pending = nil }
            throw (error as? Failure) ?? .unavailable(retryAfter: nil)
        }
    }

    /// FCM called `value` invalid (401): the next send asks for a new one.
    func invalidate(_ value: String) {
        if self.token?.value == value { self.token = nil }
    }

    private struct Header: Encodable {
        let alg = "RS256"
        let typ = "JWT"
        let kid: String?
    }

    private struct Claims: Encodable {
        let iss: String
        let scope: String
        let aud: String
        let iat: Int64
        let exp: Int64
    }

    private struct Answer: Decodable {
        let access_token: String
        let expires_in: Int
    }

    private struct Refusal: Decodable {
        let error: String
        let error_description: String?
    }

    private func fetch() async throws -> Token {
        let now = self.clock()
        let issued = Int64(now.timeIntervalSince1970)
        let assertion: String
        do {
            assertion = try JSONWebToken.compact(
                header: Header(kid: self.account.privateKeyID),
                claims: Claims(
                    iss: self.account.clientEmail,
                    scope: Self.scope,
                    aud: self.audience,
                    iat: issued,
                    exp: issued + 3600
                )
            ) { try self.account.privateKey.signRS256($0) }
        } catch {
            throw Failure.refused("the assertion could not be signed")
        }
        // base64url and '.' need no form encoding; the grant type's ':' does.
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let request = HTTP2Request(
            path: self.path,
            headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")],
            body: Array(body.utf8)
        )
        let response: HTTP2Response
        do {
            response = try await self.client.send(request, timeout: self.timeout)
        } catch {
            self.logger.warning("FCM token endpoint unreachable", metadata: ["error": "\(error)"])
            throw Failure.unavailable(retryAfter: nil)
        }
        switch response.status {
        case 200:
            guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body)),
                !answer.access_token.isEmpty, answer.expires_in > 0
            else {
                throw Failure.unavailable(retryAfter: nil)
            }
            return Token(value: answer.access_token, expiresAt: now.addingTimeInterval(TimeInterval(answer.expires_in)))
        case 429, 500...599:
            throw Failure.unavailable(retryAfter: RetryAfter.parse(response.header("retry-after")))
        default:
            let refusal = try? JSONDecoder().decode(Refusal.self, from: Data(response.body))
            let reason = refusal?.error ?? "HTTP \(response.status)"
            self.logger.error(
                "FCM token endpoint refused the service account",
                metadata: ["oauth.error": "\(reason)", "oauth.description": "\(refusal?.error_description ?? "")"]
            )
            throw Failure.refused(reason)
        }
    }
}
