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
import Synchronization

/// Sends notifications to browsers through their push services (RFC 8030): one POST to the subscription's endpoint
/// per push, the payload encrypted for the subscription (`WebPushEncryption`, RFC 8291 aes128gcm) and signed for
/// by the operator's VAPID key (`WebPushVAPID`, RFC 8292), with `TTL`, `Urgency` and `Topic` (collapsing).
///
/// Each push service origin (fcm.googleapis.com, updates.push.services.mozilla.com, web.push.apple.com, …) gets
/// its own `HTTP2Client`, made on first use, with pushes multiplexed as streams. The client speaks HTTP/2 only
/// (ALPN h2), which every browser vendor's push service offers; a push service that only speaks HTTP/1.1 fails the
/// TLS handshake and its pushes are retried, then failed, with the connection error in the log.
public final class WebPushProvider: PushProvider {
    public var platform: PushPlatform { .webPush }

    private let configuration: WebPushConfiguration
    private let vapid: WebPushVAPID
    private let group: any EventLoopGroup
    private let clock: @Sendable () -> Date
    private let logger: Logger
    private let clients = Mutex<[HTTPSOrigin: HTTP2Client]>([:])
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Push services one provider keeps connections to; beyond it a push is retried later (an endpoint allowlist,
    /// `KINDRED_NOTIFY_WEB_PUSH_HOSTS`, normally keeps the number at a handful).
    static let maximumOrigins = 64

    /// Reads the VAPID key. Connections open with the first push to each push service.
    /// - Parameter clock: the time VAPID tokens are issued at and expiries judged by (tests move it).
    /// - Throws: `PushConfigurationError` for a subject that is not `mailto:` or `https:`; `OpenSSLError` for a key
    ///   file that is not a P-256 PEM key (naming the file, never its contents).
    public init(
        configuration: WebPushConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        guard configuration.subject.hasPrefix("mailto:") || configuration.subject.hasPrefix("https://") else {
            throw PushConfigurationError("the Web Push subject must be a mailto: or https: URL")
        }
        if let file = configuration.trustRootsFile {
            // Fail at start, not at the first push, when the CA file is unusable.
            _ = try TLSContext(configuration: .client(trustRoots: .file(file), serverName: "localhost"))
        }
        self.configuration = configuration
        self.vapid = try WebPushVAPID(
            key: try P256PrivateKey(pemFile: configuration.vapidKeyFile),
            subject: configuration.subject,
            lifetime: min(configuration.tokenLifetime, .seconds(86_400)),
            refreshMargin: configuration.tokenRefreshMargin,
            clock: clock
        )
        self.group = group
        self.clock = clock
        self.logger = logger
    }

    /// The VAPID public key (base64url, uncompressed point): browsers pass it to `pushManager.subscribe` as
    /// `applicationServerKey`.
    public var applicationServerKey: String { self.vapid.publicKey }

    public func send(_ notification: PushNotification, to target: PushTarget) async -> PushOutcome {
        guard case .webPush(let endpoint, let p256dh, let auth) = target else {
            return .rejected(reason: "not a Web Push target")
        }
        guard let (origin, path) = try? HTTPSOrigin.split(endpoint) else {
            return .rejected(reason: "Endpoint is not an https URL")
        }
        guard let p256dhBytes = Base64URL.decode(p256dh), let authBytes = Base64URL.decode(auth) else {
            return .targetGone  // keys a browser cannot have made: the subscription is unusable
        }
        var timeToLive = Int64(self.configuration.defaultTimeToLive.components.seconds)
        if let expiresAt = notification.expiresAt {
            let seconds = Int64(expiresAt.timeIntervalSince(self.clock()).rounded(.down))
            guard seconds > 0 else { return .rejected(reason: "Expired before it was sent") }
            timeToLive = seconds
        }
        let body: [UInt8]
        let authorization: String
        let audience = origin.port == 443 ? "https://\(origin.host)" : "https://\(origin.host):\(origin.port)"
        do {
            let plaintext = Array(try Self.encoder.encode(WebPushPayload(notification)))
            body = try WebPushEncryption.encrypt(
                plaintext, p256dh: p256dhBytes, authSecret: authBytes, paddingBlock: self.configuration.paddingBlock)
            authorization = try self.vapid.authorization(audience: audience)
        } catch WebPushEncryption.Failure.invalidSubscriptionKeys {
            return .targetGone
        } catch WebPushEncryption.Failure.tooLarge {
            return .rejected(reason: "Payload too large")
        } catch {
            self.logger.error("Web Push request could not be built", metadata: ["error": "\(error)"])
            return .rejected(reason: "Request could not be built")
        }
        var headers = [
            HTTP2Header("authorization", authorization),
            HTTP2Header("ttl", String(timeToLive)),
            HTTP2Header("urgency", notification.priority == .high ? "high" : "normal"),
            HTTP2Header("content-encoding", "aes128gcm"),
            HTTP2Header("content-type", "application/octet-stream"),
        ]
        if let collapseKey = notification.collapseKey {
            headers.append(HTTP2Header("topic", WebPushTopic.from(collapseKey)))
        }
        guard let client = self.client(for: origin) else { return .retryLater(after: nil) }
        let response: HTTP2Response
        do {
            response = try await client.send(
                HTTP2Request(path: path, headers: headers, body: body), timeout: self.configuration.requestTimeout)
        } catch {
            self.logger.debug(
                "Web Push request failed",
                metadata: ["error": "\(error)", "push.id": "\(notification.id)", "push.origin": "\(audience)"])
            return .retryLater(after: nil)
        }
        let outcome = WebPushResponse(status: response.status, retryAfter: response.header("retry-after")).outcome
        if !(200...299).contains(response.status) {
            if response.status == 401 || response.status == 403 { self.vapid.invalidate(audience: audience) }
            self.logger.debug(
                "Web Push service refused a push",
                metadata: ["http.status": "\(response.status)", "push.id": "\(notification.id)", "push.origin": "\(audience)"])
        }
        return outcome
    }

    /// The client of `origin`, made on first use; nil past `maximumOrigins` or when TLS cannot be set up.
    private func client(for origin: HTTPSOrigin) -> HTTP2Client? {
        self.clients.withLock { clients in
            if let client = clients[origin] { return client }
            guard clients.count < Self.maximumOrigins else {
                self.logger.warning("Web Push: too many push service origins", metadata: ["push.origin": "\(origin.host)"])
                return nil
            }
            do {
                let client = HTTP2Client(
                    configuration: try origin.clientConfiguration(
                        trustRootsFile: self.configuration.trustRootsFile,
                        connections: self.configuration.connectionsPerOrigin
                    ),
                    group: self.group,
                    logger: self.logger
                )
                clients[origin] = client
                return client
            } catch {
                self.logger.error("Web Push: TLS setup failed", metadata: ["error": "\(error)"])
                return nil
            }
        }
    }

    /// Closes every connection once its pushes are answered.
    public func close() async {
        let clients = self.clients.withLock { clients in
            defer { clients.removeAll() }
            return Array(clients.values)
        }
        for client in clients { await client.close() }
    }
}
