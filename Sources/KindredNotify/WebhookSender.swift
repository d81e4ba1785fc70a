import Foundation
import KindredGRPC
import KindredHTTP2
import KindredPostgres
import Logging
import CoreMetrics
import NIOCore
import Synchronization

/// Posts due webhook deliveries to their endpoints, signed the Standard Webhooks way, and acts on each answer
/// (`WebhookAttemptOutcome`): delivered; gone → the endpoint is disabled; slow down → that endpoint alone is
/// paused; anything else → retried on the `WebhookRetrySchedule`, failed after a day (kept for replay).
///
/// Each endpoint's deliveries go out together on its own HTTP/2 connection (one client per origin) in a task of
/// their own, and an endpoint still busy is not claimed again: a slow endpoint waits for its timeout alone while
/// the others carry on. Claims hold a lease in the database, so a sender killed mid-burst loses nothing: its
/// deliveries are taken again once the lease runs out, with the same `webhook-id` (at least once).
final class WebhookSender: Sendable {
    let database: PostgresClient
    let settings: WebhookSettings
    let logger: Logger
    let store = WebhookStore()
    private let clients = Mutex<[String: HTTP2Client]>([:])
    private let busy = Mutex<Set<String>>([])
    /// Origins whose connection reached an address ``WebhookAddressPolicy`` refuses (said in `last_error`).
    private let refusedOrigins = Mutex<Set<String>>([])
    private let counters: [String: Counter]

    /// Deliveries of one endpoint claimed at a time (sent concurrently on its connection).
    static let perEndpoint = 16
    static let outcomes = ["delivered", "retried", "failed", "gone", "paused"]

    init(database: PostgresClient, settings: WebhookSettings, metrics: any MetricsFactory, logger: Logger) {
        self.database = database
        self.settings = settings
        self.logger = logger
        var counters: [String: Counter] = [:]
        for outcome in Self.outcomes {
            counters[outcome] = Counter(
                label: "notify_webhook_attempts_total",
                dimensions: [("outcome", outcome)],
                factory: metrics
            )
        }
        self.counters = counters
    }

    /// Longer than any attempt of a claimed batch can take.
    var lease: Duration { self.settings.timeout + .seconds(30) }

    /// Claims and sends due deliveries until cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                do {
                    let busy = self.busy.withLock { Array($0) }
                    let due = try await self.store.claimDue(
                        perEndpoint: Self.perEndpoint,
                        busy: busy,
                        lease: self.lease,
                        in: self.database
                    )
                    for (endpoint, deliveries) in Dictionary(grouping: due, by: \.endpointID) {
                        self.busy.withLock { _ = $0.insert(endpoint) }
                        group.addTask {
                            await self.send(deliveries)
                            self.busy.withLock { _ = $0.remove(endpoint) }
                        }
                    }
                    if due.isEmpty { try await Task.sleep(for: self.settings.pollInterval) }
                } catch is CancellationError {
                    break
                } catch {
                    self.logger.warning("webhook sender: \(error)")
                    try? await Task.sleep(for: self.settings.pollInterval)
                }
            }
            group.cancelAll()
        }
    }

    /// One endpoint's claimed deliveries, concurrently.
    func send(_ deliveries: [DueWebhookDelivery]) async {
        await withDiscardingTaskGroup { group in
            for delivery in deliveries {
                group.addTask {
                    do {
                        try await self.attempt(delivery)
                    } catch {
                        // The lease brings it back.
                        self.logger.warning("webhook sender: recording an attempt failed: \(error)")
                    }
                }
            }
        }
    }

    /// One attempt at one delivery, and its outcome recorded.
    func attempt(_ delivery: DueWebhookDelivery) async throws {
        let url: WebhookURL
        do {
            url = try WebhookURL(
                delivery.url, httpHosts: self.settings.httpHosts, allowPrivateHosts: self.settings.allowPrivateHosts)
        } catch {
            return try await self.store.failedAttempt(
                delivery.deliveryID,
                status: 0,
                error: "the URL is not allowed any more",
                retryAfter: nil,
                in: self.database
            )
        }
        let secrets: [WebhookSecret]
        do {
            let stored = delivery.storedSecrets
            secrets = try WebhookSecretsAtRest.open(
                stored[0], stored.count > 1 ? stored[1] : nil, sealed: delivery.sealed, endpoint: delivery.endpointID,
                key: self.settings.secretKey)
        } catch {
            return try await self.store.failedAttempt(
                delivery.deliveryID,
                status: 0,
                error: "the signing secret does not open with \(WebhookSecretsAtRest.setting)",
                retryAfter: nil,
                in: self.database
            )
        }
        let timestamp = Int64(Date().timeIntervalSince1970)
        let body = Array(delivery.body.utf8)
        let request = HTTP2Request(
            method: "POST",
            path: url.path,
            headers: [
                HTTP2Header("content-type", "application/json"),
                HTTP2Header("user-agent", "Kindred-Webhooks/1"),
                HTTP2Header("webhook-id", delivery.deliveryID),
                HTTP2Header("webhook-timestamp", String(timestamp)),
                HTTP2Header(
                    "webhook-signature",
                    WebhookSignature.header(
                        id: delivery.deliveryID,
                        timestamp: timestamp,
                        body: body,
                        secrets: secrets
                    )
                ),
            ],
            body: body
        )
        let outcome: WebhookAttemptOutcome
        var status = 0
        do {
            let response = try await self.client(for: url).send(request, timeout: self.settings.timeout)
            status = response.status
            outcome = WebhookAttemptOutcome(status: response.status, retryAfter: response.header("retry-after"))
        } catch let error as RPCError {
            let refused = self.refusedOrigins.withLock { $0.remove(url.origin) } != nil
            outcome = .failed(error: refused ? "the host resolved to a refused address: " + WebhookAddressPolicy.hint
                : Self.describe(error))
        } catch {
            outcome = .failed(error: "no answer")
        }
        try await self.record(outcome, status: status, of: delivery)
    }

    private func record(_ outcome: WebhookAttemptOutcome, status: Int, of delivery: DueWebhookDelivery) async throws {
        let schedule = self.settings.schedule
        let elapsed = Duration.milliseconds(delivery.elapsedMs)
        switch outcome {
        case .delivered:
            try await self.store.delivered(delivery.deliveryID, status: status, in: self.database)
            self.count("delivered")
        case .gone:
            try await self.database.withTransaction { transaction in
                try await self.store.disableGone(delivery.endpointID, in: transaction)
                try await self.store.failedAttempt(
                    delivery.deliveryID,
                    status: status,
                    error: "HTTP 410: endpoint disabled",
                    retryAfter: nil,
                    in: transaction
                )
            }
            self.count("gone")
            self.logger.info(
                "webhook endpoint answered 410, disabled",
                metadata: ["webhook.endpoint": "\(delivery.endpointID)"]
            )
        case .slowDown(let retryAfter):
            let decision = schedule.next(
                attempts: delivery.attempts + 1,
                elapsed: elapsed,
                retryAfter: retryAfter,
                random: .random(in: 0..<1)
            )
            if case .retry(let delay) = decision {
                try await self.store.pause(delivery.endpointID, for: delay, in: self.database)
            }
            try await self.store.failedAttempt(
                delivery.deliveryID,
                status: status,
                error: "HTTP 429",
                retryAfter: decision.delay,
                in: self.database
            )
            self.count(decision == .giveUp ? "failed" : "paused")
        case .failed(let error):
            let decision = schedule.next(attempts: delivery.attempts + 1, elapsed: elapsed, random: .random(in: 0..<1))
            try await self.store.failedAttempt(
                delivery.deliveryID,
                status: status,
                error: error,
                retryAfter: decision.delay,
                in: self.database
            )
            self.count(decision == .giveUp ? "failed" : "retried")
        }
    }

    /// The client of a URL's origin, made on first use and kept (one HTTP/2 connection per endpoint origin).
    private func client(for url: WebhookURL) throws -> HTTP2Client {
        if let client = self.clients.withLock({ $0[url.origin] }) { return client }
        let origin = url.origin
        // The address every connection reaches is checked (a name may resolve elsewhere than it did before).
        var check: (@Sendable (SocketAddress) -> Bool)?
        if !self.settings.allowPrivateHosts {
            check = { [weak self] address in
                if WebhookAddressPolicy.allows(address) { return true }
                self?.refused(address, origin: origin)
                return false
            }
        }
        let configuration = try url.clientConfiguration(trustRootsFile: self.settings.trustRootsFile, addressCheck: check)
        return self.clients.withLock { clients in
            if let client = clients[url.origin] { return client }
            let client = HTTP2Client(configuration: configuration, logger: self.logger)
            clients[url.origin] = client
            return client
        }
    }

    /// A connection of `origin` reached `address`, which ``WebhookAddressPolicy`` refuses: said in the attempt's
    /// `last_error` and logged.
    private func refused(_ address: SocketAddress, origin: String) {
        self.refusedOrigins.withLock { _ = $0.insert(origin) }
        self.logger.warning(
            "webhook connection refused: the host resolved to a refused address",
            metadata: ["webhook.origin": "\(origin)", "net.peer.address": "\(address)"])
    }

    /// Closes every endpoint's connection.
    func close() async {
        let clients = self.clients.withLock { clients in
            defer { clients = [:] }
            return Array(clients.values)
        }
        for client in clients { await client.close() }
    }

    /// `last_error` for an attempt without an answer.
    static func describe(_ error: RPCError) -> String {
        switch error.code {
        case .deadlineExceeded: "timeout"
        case .unavailable: "cannot connect over HTTP/2 (TLS with ALPN h2, or h2 in clear text for http)"
        case .resourceExhausted: "answer too large"
        default: "no answer"
        }
    }

    private func count(_ outcome: String) {
        self.counters[outcome]?.increment()
    }
}

extension WebhookRetrySchedule.Decision {
    /// The delay of a retry; nil for giving up.
    var delay: Duration? {
        if case .retry(let after) = self { after } else { nil }
    }
}
