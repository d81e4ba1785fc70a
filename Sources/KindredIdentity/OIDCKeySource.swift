import Foundation
import KindredGRPC
import KindredHTTP2
import Logging

/// The signing keys of OpenID providers (Google, Apple), fetched from their JWKS URLs with `HTTP2Client` and kept
/// as the providers' HTTP cache headers say (`Cache-Control: max-age`), beside an optional key file
/// (`KINDRED_AUTH_OIDC_JWKS_FILE`, for tests and air-gapped sites).
///
/// A token signed with a key not in the set makes the documents be fetched again, since providers rotate keys
/// before their cache lifetime ends; a document is fetched at most once per `minimumRefreshInterval` whatever the
/// reason, so tokens with made-up key ids cannot turn sign-in attempts into requests to Google or Apple. A fetch
/// that fails keeps the keys already known.
public actor OIDCKeySource {
    public struct Configuration: Sendable {
        /// JWKS documents, e.g. `https://www.googleapis.com/oauth2/v3/certs`, `https://appleid.apple.com/auth/keys`.
        public var urls: [String]
        /// PEM file of the CA the servers' certificates must chain to; nil for the system store.
        public var trustRootsFile: String?
        /// A document is fetched at most this often. Default 60 s.
        public var minimumRefreshInterval: Duration = .seconds(60)
        /// How long a document without `max-age` is kept. Default 1 hour.
        public var defaultMaxAge: Duration = .seconds(3600)
        /// The longest a document is kept, whatever its `max-age`. Default 1 day.
        public var maximumMaxAge: Duration = .seconds(86_400)
        /// Time allowed for one fetch. Default 5 s.
        public var timeout: Duration = .seconds(5)

        public init(urls: [String], trustRootsFile: String? = nil) {
            self.urls = urls
            self.trustRootsFile = trustRootsFile
        }
    }

    /// One JWKS document: where it is, its keys and when it was fetched and becomes stale.
    private struct Document: Sendable {
        let client: HTTP2Client
        let path: String
        var keys: JSONWebKeySet?
        var fetchedAt: Date?
        var staleAt: Date?
    }

    private let configuration: Configuration
    private let fileKeys: JSONWebKeySet?
    private let clock: @Sendable () -> Date
    private let logger: Logger
    private var documents: [Document]
    private var pending: Task<Void, Never>?

    /// - Throws: `HTTPSOriginError` for a URL that is not https://, `OpenSSLError` for an unreadable CA file.
    public init(
        configuration: Configuration,
        fileKeys: JSONWebKeySet? = nil,
        logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.configuration = configuration
        self.fileKeys = fileKeys
        self.clock = clock
        self.logger = logger
        self.documents = try configuration.urls.map { url in
            let (origin, path) = try HTTPSOrigin.split(url)
            let client = HTTP2Client(
                configuration: try origin.clientConfiguration(
                    trustRootsFile: configuration.trustRootsFile,
                    connections: 1,
                    maxBodySize: 256 << 10
                ),
                logger: logger
            )
            return Document(client: client, path: path)
        }
    }

    /// The keys to verify with now: the file's and every document's, fetching the documents that are stale.
    public func keySet() async -> JSONWebKeySet {
        let now = self.clock()
        await self.refresh { document in document.staleAt.map { $0 <= now } ?? true }
        return self.merged()
    }

    /// The keys after a token named `keyID`, which the set lacks: documents are fetched again unless one was
    /// fetched within `minimumRefreshInterval`.
    public func keySet(afterUnknownKey keyID: String) async -> JSONWebKeySet {
        if self.merged().keys[keyID] == nil {
            await self.refresh { _ in true }
        }
        return self.merged()
    }

    /// Verifies `token` by `verifier`'s rules (issuers, audiences, expiry, nonce) against these keys. A token
    /// naming a key the set lacks fetches the keys again (rate-limited, see `keySet(afterUnknownKey:)`) and is
    /// checked once more.
    public nonisolated func verify(
        _ token: String,
        with verifier: IDTokenVerifier,
        nonce: String?
    ) async throws(TokenError) -> IDTokenClaims {
        var verifier = verifier
        verifier.keySet = await self.keySet()
        do {
            return try verifier.verify(token, nonce: nonce)
        } catch where error.code == .unknownKey {
            guard let keyID = try? CompactJWS(token).header.kid else { throw error }
            verifier.keySet = await self.keySet(afterUnknownKey: keyID)
            return try verifier.verify(token, nonce: nonce)
        }
    }

    /// Closes the connections.
    public func close() async {
        for document in self.documents { await document.client.close() }
    }

    private func merged() -> JSONWebKeySet {
        var keys = self.fileKeys?.keys ?? [:]
        for document in self.documents {
            keys.merge(document.keys?.keys ?? [:]) { file, _ in file }
        }
        return JSONWebKeySet(keys: keys)
    }

    /// Fetches, concurrently, the documents `wanted` selects and the rate limit allows. Callers arriving while a
    /// refresh runs wait for it instead of starting their own.
    private func refresh(_ wanted: (Document) -> Bool) async {
        if let pending = self.pending {
            await pending.value
            return
        }
        let now = self.clock()
        let interval = TimeInterval(self.configuration.minimumRefreshInterval.components.seconds)
        let due = self.documents.indices.filter { index in
            let document = self.documents[index]
            guard wanted(document) else { return false }
            return document.fetchedAt.map { now.timeIntervalSince($0) >= interval } ?? true
        }
        guard !due.isEmpty else { return }
        for index in due { self.documents[index].fetchedAt = now }
        let task = Task {
            await withTaskGroup(of: (Int, JSONWebKeySet?, Duration?).self) { group in
                let timeout = self.configuration.timeout
                let logger = self.logger
                for index in due {
                    let document = self.documents[index]
                    group.addTask {
                        let (keys, maxAge) = await Self.fetch(document, timeout: timeout, logger: logger)
                        return (index, keys, maxAge)
                    }
                }
                for await (index, keys, maxAge) in group {
                    self.store(index: index, keys: keys, maxAge: maxAge, fetchedAt: now)
                }
            }
        }
        self.pending = task
        await task.value
        self.pending = nil
    }

    private func store(index: Int, keys: JSONWebKeySet?, maxAge: Duration?, fetchedAt: Date) {
        guard let keys else { return }  // a failed fetch keeps what was known
        let age = min(maxAge ?? self.configuration.defaultMaxAge, self.configuration.maximumMaxAge)
        self.documents[index].keys = keys
        self.documents[index].staleAt = fetchedAt.addingTimeInterval(TimeInterval(age.components.seconds))
    }

    /// GETs one document: its keys and `max-age`, or nil keys when it could not be had.
    private static func fetch(
        _ document: Document,
        timeout: Duration,
        logger: Logger
    ) async -> (JSONWebKeySet?, Duration?) {
        let request = HTTP2Request(method: "GET", path: document.path, headers: [HTTP2Header("accept", "application/json")])
        do {
            let response = try await document.client.send(request, timeout: timeout)
            guard response.status == 200 else {
                logger.warning("JWKS fetch refused", metadata: ["http.status": "\(response.status)", "jwks.path": "\(document.path)"])
                return (nil, nil)
            }
            let keys = try JSONWebKeySet(json: Data(response.body))
            return (keys, CacheControl.maxAge(response.header("cache-control")))
        } catch {
            logger.warning("JWKS fetch failed", metadata: ["error": "\(error)", "jwks.path": "\(document.path)"])
            return (nil, nil)
        }
    }
}

/// The `max-age` directive of a `Cache-Control` header (RFC 9111 §5.2.2.1); `no-store`/`no-cache` count as 0.
enum CacheControl {
    static func maxAge(_ header: String?) -> Duration? {
        guard let header else { return nil }
        var maxAge: Duration?
        for directive in header.lowercased().split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            switch parts.first {
            case "max-age":
                if parts.count == 2, let seconds = Int(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))), seconds >= 0 {
                    maxAge = .seconds(seconds)
                }
            case "no-store", "no-cache":
                return .seconds(0)
            default:
                break
            }
        }
        return maxAge
    }
}
