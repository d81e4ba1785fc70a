#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import KindredGRPC
import KindredHTTP2
import Logging
import NIOCore
import NIOPosix

/// Sends notifications through Firebase Cloud Messaging's HTTP v1 API: POST
/// `/v1/projects/<project>/messages:send` over `HTTP2Client` (HTTP/2 over TLS, sends multiplexed on each
/// connection), authorised with the service account's OAuth 2.0 access token (`FCMAccessTokens`).
public final class FCMProvider: PushProvider {
    public var platform: PushPlatform { .fcm }

    private let configuration: FCMConfiguration
    private let client: HTTP2Client
    private let tokenClient: HTTP2Client?
    private let tokens: FCMAccessTokens
    private let sendPath: String
    private let clock: @Sendable () -> Date
    private let logger: Logger
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
    /// The pause asked for while the token endpoint refuses the account: an operator has to fix the key, and
    /// the notifications wait for that rather than being dropped.
    static let refusedTokenPause: Duration = .seconds(60)

    /// Reads the service-account key and sets up the connections (opened with the first send).
    /// - Parameter clock: the time access tokens are requested and judged at (tests move it).
    /// - Throws: `PushConfigurationError` for a key file that is not a service-account key or a malformed URL;
    ///   `OpenSSLError` for a CA file that cannot be read.
    public init(
        configuration: FCMConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        let account = try FCMServiceAccount(file: configuration.serviceAccountFile)
        let origin = try PushConfigurationError.origin(configuration.baseURL, setting: "FCM base URL")
        let tokenURL = configuration.tokenURL ?? account.tokenURI
        let token = try PushConfigurationError.split(tokenURL, setting: "FCM token URL")
        let client = HTTP2Client(
            configuration: try origin.clientConfiguration(
                trustRootsFile: configuration.trustRootsFile,
                connections: configuration.connectionCount
            ),
            group: group,
            logger: logger
        )
        // The token endpoint is usually another host (oauth2.googleapis.com): its own client, one connection.
        let tokenClient =
            token.origin == origin
            ? nil
            : HTTP2Client(
                configuration: try token.origin.clientConfiguration(
                    trustRootsFile: configuration.trustRootsFile,
                    connections: 1
                ),
                group: group,
                logger: logger
            )
        self.configuration = configuration
        self.client = client
        self.tokenClient = tokenClient
        self.tokens = FCMAccessTokens(
            account: account,
            client: tokenClient ?? client,
            tokenURL: tokenURL,
            path: token.path,
            timeout: configuration.requestTimeout,
            refreshMargin: configuration.tokenRefreshMargin,
            clock: clock,
            logger: logger
        )
        self.sendPath = "/v1/projects/\(account.projectID)/messages:send"
        self.clock = clock
        self.logger = logger
    }

    public func send(_ notification: PushNotification, to target: PushTarget) async -> PushOutcome {
        guard case .fcm(let registrationToken) = target else { return .rejected(reason: "not an FCM target") }
        guard !registrationToken.isEmpty else { return .targetGone }
        var ttl: Int64?
        if let expiresAt = notification.expiresAt {
            let seconds = Int64(expiresAt.timeIntervalSince(self.clock()).rounded(.down))
            guard seconds > 0 else { return .rejected(reason: "Expired before it was sent") }
            ttl = seconds
        }
        let body: [UInt8]
        do {
            body = Array(try Self.encoder.encode(FCMMessage(notification, registrationToken: registrationToken, ttlSeconds: ttl)))
        } catch {
            return .rejected(reason: "Request could not be built")
        }
        let accessToken: String
        do {
            accessToken = try await self.tokens.current()
        } catch {
            switch error {
            case .unavailable(let retryAfter): return .retryLater(after: retryAfter)
            case .refused: return .retryLater(after: Self.refusedTokenPause)
            }
        }
        let request = HTTP2Request(
            path: self.sendPath,
            headers: [
                HTTP2Header("authorization", "Bearer \(accessToken)"),
                HTTP2Header("content-type", "application/json; charset=UTF-8"),
            ],
            body: body
        )
        let response: HTTP2Response
        do {
            response = try await self.client.send(request, timeout: self.configuration.requestTimeout)
        } catch {
            self.logger.debug("FCM request failed", metadata: ["error": "\(error)", "push.id": "\(notification.id)"])
            return .retryLater(after: nil)
        }
        let answer = FCMResponse(status: response.status, retryAfter: response.header("retry-after"), body: response.body)
        if response.status != 200 {
            if response.status == 401 { await self.tokens.invalidate(accessToken) }
            self.logger.debug(
                "FCM refused a send",
                metadata: ["http.status": "\(response.status)", "fcm.reason": "\(answer.reason)", "push.id": "\(notification.id)"]
            )
        }
        return answer.outcome
    }

    /// Closes the connections once their requests are answered.
    public func close() async {
        await self.client.close()
        await self.tokenClient?.close()
    }
}
