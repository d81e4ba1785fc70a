#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import KindredGRPC
import KindredHTTP2
import KindredOpenSSL
import Logging
import NIOCore
import NIOPosix

/// Sends alert notifications through Apple's push provider API: HTTP/2 over TLS on our own client (nghttp2 and
/// OpenSSL, `HTTP2Client`), one POST `/3/device/<token>` per push, many multiplexed on each connection, with a
/// provider token (`APNsProviderToken`) in `authorization`.
public final class APNsProvider: PushProvider {
    public var platform: PushPlatform { .apns }

    private let configuration: APNsConfiguration
    private let client: HTTP2Client
    private let token: APNsProviderToken
    private let clock: @Sendable () -> Date
    private let logger: Logger
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Reads the signing key and sets up the connections (opened with the first push).
    /// - Parameter clock: the time provider tokens are issued at (tests move it to see tokens refreshed).
    /// - Throws: `PushConfigurationError` for a malformed base URL or key id; `OpenSSLError` for a key file that
    ///   is not a P-256 PEM key or a CA file that cannot be read (naming the file, never its contents).
    public init(
        configuration: APNsConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        guard !configuration.keyID.isEmpty, !configuration.teamID.isEmpty else {
            throw PushConfigurationError("the APNs key id and team id must be set")
        }
        let origin = try PushConfigurationError.origin(configuration.baseURL, setting: "APNs base URL")
        self.configuration = configuration
        self.client = HTTP2Client(
            configuration: try origin.clientConfiguration(
                trustRootsFile: configuration.trustRootsFile,
                connections: configuration.connectionCount
            ),
            group: group,
            logger: logger
        )
        self.token = APNsProviderToken(
            key: try P256PrivateKey(pemFile: configuration.keyFile),
            keyID: configuration.keyID,
            teamID: configuration.teamID,
            refreshInterval: configuration.tokenRefreshInterval,
            clock: clock
        )
        self.clock = clock
        self.logger = logger
    }

    public func send(_ notification: PushNotification, to target: PushTarget) async -> PushOutcome {
        guard case .apns(let deviceToken, let targetTopic) = target else {
            return .rejected(reason: "not an APNs target")
        }
        // The token goes into the path: only hex digits may (Apple's tokens are hex).
        guard !deviceToken.isEmpty, deviceToken.allSatisfy(\.isHexDigit) else { return .targetGone }
        var headers = [
            HTTP2Header("apns-push-type", "alert"),
            HTTP2Header("apns-topic", targetTopic.isEmpty ? self.configuration.topic : targetTopic),
            HTTP2Header("apns-priority", notification.priority == .high ? "10" : "5"),
            HTTP2Header("apns-id", notification.id),
            HTTP2Header("content-type", "application/json"),
        ]
        if let expiresAt = notification.expiresAt {
            guard expiresAt > self.clock() else { return .rejected(reason: "Expired before it was sent") }
            headers.append(HTTP2Header("apns-expiration", String(Int64(expiresAt.timeIntervalSince1970))))
        }
        if let collapseKey = notification.collapseKey {
            // Apple allows 64 bytes.
            guard collapseKey.utf8.count <= 64 else { return .rejected(reason: "Collapse id over 64 bytes") }
            headers.append(HTTP2Header("apns-collapse-id", collapseKey))
        }
        let providerToken: String
        let body: [UInt8]
        do {
            providerToken = try self.token.current()
            body = Array(try Self.encoder.encode(APNsPayload(notification: notification)))
        } catch {
            self.logger.error("APNs request could not be built", metadata: ["error": "\(error)"])
            return .rejected(reason: "Request could not be built")
        }
        headers.insert(HTTP2Header("authorization", "bearer \(providerToken)"), at: 0)
        let request = HTTP2Request(path: "/3/device/\(deviceToken.lowercased())", headers: headers, body: body)
        let response: HTTP2Response
        do {
            response = try await self.client.send(request, timeout: self.configuration.requestTimeout)
        } catch {
            self.logger.debug("APNs request failed", metadata: ["error": "\(error)", "push.id": "\(notification.id)"])
            return .retryLater(after: nil)
        }
        let answer = APNsResponse(status: response.status, retryAfter: response.header("retry-after"), body: response.body)
        let outcome = answer.outcome
        if response.status != 200 {
            let reason = answer.reason
            if reason == "ExpiredProviderToken" { self.token.invalidate(providerToken) }
            self.logger.debug(
                "APNs refused a push",
                metadata: ["http.status": "\(response.status)", "apns.reason": "\(reason)", "push.id": "\(notification.id)"]
            )
        }
        return outcome
    }

    /// Closes the connections once their pushes are answered.
    public func close() async {
        await self.client.close()
    }
}
