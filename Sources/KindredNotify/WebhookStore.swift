import KindredPostgres

/// The SQL of webhooks: endpoints (`webhook_endpoints`) and their deliveries (`webhook_deliveries`).
struct WebhookStore: Sendable {
    // MARK: Endpoints

    func create(
        id: String,
        url: String,
        eventTypes: [String],
        description: String,
        sealedSecret: [UInt8],
        in runner: some SQLRunner
    ) async throws -> WebhookEndpointRecord {
        try Self.endpoint(
            try await runner.query(
                """
                INSERT INTO webhook_endpoints (endpoint_id, url, event_types, description, secret, secrets_sealed)
                VALUES (\(id)::uuid, \(url), \(eventTypes)::text[], \(description), \(sealedSecret), true)
                RETURNING \(unescaped: Self.endpointColumns)
                """
            ).first!
        )
    }

    /// Every endpoint, oldest first.
    func list(in runner: some SQLRunner) async throws -> [WebhookEndpointRecord] {
        try await runner.query(
            """
            SELECT \(unescaped: Self.endpointColumns) FROM webhook_endpoints ORDER BY created_at, endpoint_id
            """
        ).map(Self.endpoint)
    }

    /// Changes the fields given (nil = keep); enabling clears `disabled_reason`. Nil when there is no such endpoint.
    func update(
        _ id: String,
        url: String?,
        eventTypes: [String]?,
        enabled: Bool?,
        description: String?,
        in runner: some SQLRunner
    ) async throws -> WebhookEndpointRecord? {
        try await runner.query(
            """
            UPDATE webhook_endpoints
            SET url = coalesce(\(url), url), event_types = coalesce(\(eventTypes)::text[], event_types),
                enabled = coalesce(\(enabled), enabled), description = coalesce(\(description), description),
                disabled_reason = CASE WHEN \(enabled)::boolean IS NOT NULL THEN '' ELSE disabled_reason END, updated_at = now()
            WHERE endpoint_id = \(id)::uuid
            RETURNING \(unescaped: Self.endpointColumns)
            """
        ).first.map(Self.endpoint)
    }

    /// Removes an endpoint and its deliveries; false when there was none.
    func delete(_ id: String, in runner: some SQLRunner) async throws -> Bool {
        try await runner.execute("DELETE FROM webhook_endpoints WHERE endpoint_id = \(id)::uuid") > 0
    }

    /// `sealedSecret` becomes the current secret; the current one signs alongside it for `grace`. Nil when there is
    /// no such endpoint. Only a row already sealed is rotated (notify seals every row when it starts).
    func rotate(_ id: String, to sealedSecret: [UInt8], grace: Duration, in runner: some SQLRunner) async throws
        -> WebhookEndpointRecord?
    {
        try await runner.query(
            """
            UPDATE webhook_endpoints
            SET previous_secret = secret, secret = \(sealedSecret),
                previous_secret_expires_at = now() + \(Self.milliseconds(grace)) * interval '1 millisecond',
                updated_at = now()
            WHERE endpoint_id = \(id)::uuid AND secrets_sealed
            RETURNING \(unescaped: Self.endpointColumns)
            """
        ).first.map(Self.endpoint)
    }

    /// The endpoint answered 410: nothing more is sent to it until an admin enables it again.
    func disableGone(_ id: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            UPDATE webhook_endpoints SET enabled = false, disabled_reason = 'GONE', updated_at = now()
            WHERE endpoint_id = \(id)::uuid
            """
        )
    }

    /// The endpoint asked for a pause (429, Retry-After): its deliveries wait until then, no one else's.
    func pause(_ id: String, for delay: Duration, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            UPDATE webhook_endpoints
            SET paused_until = greatest(paused_until, now() + \(Self.milliseconds(delay)) * interval '1 millisecond')
            WHERE endpoint_id = \(id)::uuid
            """
        )
    }

    /// Every endpoint's secrets as stored (sealed or, when written by an older version, in the clear).
    func storedSecrets(in runner: some SQLRunner) async throws -> [StoredWebhookSecrets] {
        try await runner.query(
            "SELECT endpoint_id::text, secret, previous_secret, secrets_sealed FROM webhook_endpoints ORDER BY endpoint_id"
        ).map { row in
            let (id, secret, previous, sealed) = try row.decode((String, [UInt8], [UInt8]?, Bool).self)
            return StoredWebhookSecrets(endpointID: id, secret: secret, previousSecret: previous, sealed: sealed)
        }
    }

    /// Replaces an endpoint's secrets written in the clear with their sealed values (nothing if it was sealed
    /// meanwhile: the values given are those of the clear row).
    func seal(_ id: String, secret: [UInt8], previousSecret: [UInt8]?, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            UPDATE webhook_endpoints SET secret = \(secret), previous_secret = \(previousSecret), secrets_sealed = true
            WHERE endpoint_id = \(id)::uuid AND NOT secrets_sealed
            """
        )
    }

    // MARK: Deliveries

    /// The enabled endpoints' ids by the event types each takes (an event batch reads them once: ``EventBatchFacts``).
    func enabledEndpointsByType(in runner: some SQLRunner) async throws -> [String: [String]] {
        var endpoints: [String: [String]] = [:]
        for row in try await runner.query(
            "SELECT endpoint_id::text, event_types FROM webhook_endpoints WHERE enabled ORDER BY endpoint_id"
        ) {
            let (id, types) = try row.decode((String, [String]).self)
            for type in Set(types) { endpoints[type, default: []].append(id) }
        }
        return endpoints
    }

    /// Queues `event` for each of `endpoints` (the enabled ones whose filter holds its type), once per endpoint and
    /// event (a redelivered event queues nothing more). `newID` makes each delivery's id (its `webhook-id`).
    func fanOut(
        _ event: WebhookEvent, to endpoints: [String], newID: () throws -> String, in runner: some SQLRunner
    ) async throws {
        for endpoint in endpoints {
            try await runner.execute(
                """
                INSERT INTO webhook_deliveries (delivery_id, endpoint_id, event_id, event_type, body, user_ids)
                VALUES (\(try newID())::uuid, \(endpoint)::uuid, \(event.eventID)::uuid, \(event.type), \(event.body),
                        \(event.userIDs)::uuid[])
                ON CONFLICT (endpoint_id, event_id) DO NOTHING
                """
            )
        }
    }

    /// Claims up to `perEndpoint` due deliveries of each enabled, unpaused endpoint not in `busy`: their next
    /// attempt moves `lease` ahead, so another sender (or this one after a crash) takes them again only once the
    /// lease ran out.
    func claimDue(perEndpoint: Int, busy: [String], lease: Duration, in runner: some SQLRunner) async throws
        -> [DueWebhookDelivery]
    {
        try await runner.query(
            """
            WITH due AS (
                SELECT delivery_id FROM (
                    SELECT d.delivery_id, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at) AS n
                    FROM webhook_deliveries d JOIN webhook_endpoints e USING (endpoint_id)
                    WHERE d.state = 'pending' AND d.next_attempt_at <= now() AND e.enabled
                      AND e.paused_until <= now() AND NOT (d.endpoint_id = ANY(\(busy)::uuid[]))
                ) ranked WHERE n <= \(perEndpoint)
            ), locked AS (
                SELECT delivery_id FROM webhook_deliveries WHERE delivery_id IN (SELECT delivery_id FROM due)
                FOR UPDATE SKIP LOCKED
            )
            UPDATE webhook_deliveries d
            SET next_attempt_at = now() + \(Self.milliseconds(lease)) * interval '1 millisecond'
            FROM locked, webhook_endpoints e
            WHERE d.delivery_id = locked.delivery_id AND e.endpoint_id = d.endpoint_id
            RETURNING d.delivery_id::text, d.endpoint_id::text, e.url, d.body, e.secret,
                      CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END, d.attempts,
                      (extract(epoch FROM now() - d.scheduled_at) * 1000)::int8, e.secrets_sealed
            """
        ).map { row in
            let (id, endpoint, url, body, secret, previous, attempts, elapsed, sealed) = try row.decode(
                (String, String, String, String, [UInt8], [UInt8]?, Int32, Int64, Bool).self
            )
            return DueWebhookDelivery(
                deliveryID: id,
                endpointID: endpoint,
                url: url,
                body: body,
                storedSecrets: [secret] + (previous.map { [$0] } ?? []),
                sealed: sealed,
                attempts: Int(attempts),
                elapsedMs: elapsed
            )
        }
    }

    /// The endpoint answered 2xx.
    func delivered(_ id: String, status: Int, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            UPDATE webhook_deliveries
            SET state = 'delivered', attempts = attempts + 1, last_status = \(status), last_error = '',
                delivered_at = now()
            WHERE delivery_id = \(id)::uuid AND state = 'pending'
            """
        )
    }

    /// An attempt failed: try again after `delay`, or (nil) end the delivery as failed.
    func failedAttempt(
        _ id: String,
        status: Int,
        error: String,
        retryAfter delay: Duration?,
        in runner: some SQLRunner
    ) async throws {
        try await runner.execute(
            """
            UPDATE webhook_deliveries
            SET attempts = attempts + 1, last_status = \(status), last_error = \(error),
                state = CASE WHEN \(delay == nil) THEN 'failed' ELSE 'pending' END,
                next_attempt_at = now() + \(Self.milliseconds(delay ?? .zero)) * interval '1 millisecond'
            WHERE delivery_id = \(id)::uuid AND state = 'pending'
            """
        )
    }

    /// An endpoint's deliveries, newest first, optionally of one state.
    func deliveries(
        of endpoint: String,
        state: String?,
        offset: Int,
        limit: Int,
        in runner: some SQLRunner
    ) async throws -> [WebhookDeliveryRecord] {
        try await runner.query(
            """
            SELECT delivery_id::text, endpoint_id::text, event_type, state, attempts, last_status, last_error,
                   (extract(epoch FROM created_at) * 1000)::int8, (extract(epoch FROM next_attempt_at) * 1000)::int8,
                   coalesce((extract(epoch FROM delivered_at) * 1000)::int8, 0)
            FROM webhook_deliveries
            WHERE endpoint_id = \(endpoint)::uuid AND (\(state)::text IS NULL OR state = \(state))
            ORDER BY created_at DESC, delivery_id DESC OFFSET \(offset) LIMIT \(limit)
            """
        ).map(Self.delivery)
    }

    /// Whether the endpoint exists.
    func exists(_ endpoint: String, in runner: some SQLRunner) async throws -> Bool {
        try await runner.query(
            "SELECT count(*) FROM webhook_endpoints WHERE endpoint_id = \(endpoint)::uuid"
        ).scalar(Int64.self) > 0
    }

    /// Queues a delivery again, whatever its state, with the same id: pending now, attempts and the day of retries
    /// counted afresh. Nil when there is no such delivery.
    func replay(_ id: String, in runner: some SQLRunner) async throws -> WebhookDeliveryRecord? {
        try await runner.query(
            """
            UPDATE webhook_deliveries
            SET state = 'pending', attempts = 0, last_status = 0, last_error = '', next_attempt_at = now(),
                scheduled_at = now(), delivered_at = NULL
            WHERE delivery_id = \(id)::uuid
            RETURNING delivery_id::text, endpoint_id::text, event_type, state, attempts, last_status, last_error,
                      (extract(epoch FROM created_at) * 1000)::int8, (extract(epoch FROM next_attempt_at) * 1000)::int8,
                      0::int8
            """
        ).first.map(Self.delivery)
    }

    /// Deletes every delivery naming `user` (account deletion).
    func erase(_ user: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM webhook_deliveries WHERE \(user)::uuid = ANY(user_ids)")
    }

    func count(naming user: String, in runner: some SQLRunner) async throws -> Int64 {
        try await runner.query(
            "SELECT count(*) FROM webhook_deliveries WHERE \(user)::uuid = ANY(user_ids)"
        ).scalar(Int64.self)
    }

    /// Deletes delivered and failed deliveries older than `days`; returns how many.
    @discardableResult
    func purge(olderThanDays days: Int, in runner: some SQLRunner) async throws -> Int {
        try await runner.execute(
            """
            DELETE FROM webhook_deliveries
            WHERE state <> 'pending' AND created_at < now() - \(days) * interval '1 day'
            """
        )
    }

    /// What ``endpoint(_:)`` decodes.
    private static let endpointColumns = """
        endpoint_id::text, url, event_types, description, enabled, disabled_reason,
        (extract(epoch FROM created_at) * 1000)::int8,
        CASE WHEN previous_secret_expires_at > now()
             THEN (extract(epoch FROM previous_secret_expires_at) * 1000)::int8 ELSE 0 END
        """

    private static func endpoint(_ row: PostgresRow) throws -> WebhookEndpointRecord {
        let (id, url, types, description, enabled, reason, created, previousExpires) = try row.decode(
            (String, String, [String], String, Bool, String, Int64, Int64).self
        )
        return WebhookEndpointRecord(
            endpointID: id,
            url: url,
            eventTypes: types,
            description: description,
            enabled: enabled,
            disabledReason: reason,
            createdUnixMs: created,
            previousSecretExpiresUnixMs: previousExpires
        )
    }

    private static func delivery(_ row: PostgresRow) throws -> WebhookDeliveryRecord {
        let (id, endpoint, type, state, attempts, status, error, created, next, delivered) = try row.decode(
            (String, String, String, String, Int32, Int32, String, Int64, Int64, Int64).self
        )
        return WebhookDeliveryRecord(
            deliveryID: id,
            endpointID: endpoint,
            eventType: type,
            state: state,
            attempts: Int(attempts),
            lastStatus: Int(status),
            lastError: error,
            createdUnixMs: created,
            nextAttemptUnixMs: next,
            deliveredUnixMs: delivered
        )
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
