import KindredPostgres

/// The SQL of devices (table `devices`): one row per push token, owned by one account at a time.
struct DeviceStore: Sendable {
    private static let columns = """
        device_id::text, platform, token, app_id, locale, time_zone, app_version,
        (extract(epoch FROM created_at) * 1000)::bigint, (extract(epoch FROM registered_at) * 1000)::bigint,
        p256dh, auth_secret
        """

    /// Registers `registration` for `user` under `session`: a new row, a refresh of the caller's own row (same
    /// id), or the row moved from another account (new id, new creation time). Returns the row and whether the
    /// caller did not hold it before.
    func register(
        _ registration: DeviceRegistration, user: String, session: String?, newID: String, in transaction: PostgresTransaction
    ) async throws -> (DeviceRecord, created: Bool) {
        let previousOwner = try await transaction.query(
            "SELECT user_id::text FROM devices WHERE platform = \(registration.platform.rawValue) AND token = \(registration.token) FOR UPDATE"
        ).first?.decode(String.self, at: 0)
        let rows = try await transaction.query(
            """
            INSERT INTO devices (device_id, user_id, session_id, platform, token, p256dh, auth_secret, app_id, locale,
                                 time_zone, app_version)
            VALUES (\(newID)::uuid, \(user)::uuid, \(session), \(registration.platform.rawValue), \(registration.token),
                    \(registration.p256dh), \(registration.authSecret), \(registration.appID), \(registration.locale),
                    \(registration.timeZone), \(registration.appVersion))
            ON CONFLICT (platform, token) DO UPDATE SET
                device_id = CASE WHEN devices.user_id = EXCLUDED.user_id THEN devices.device_id ELSE EXCLUDED.device_id END,
                created_at = CASE WHEN devices.user_id = EXCLUDED.user_id THEN devices.created_at ELSE now() END,
                user_id = EXCLUDED.user_id, session_id = EXCLUDED.session_id, p256dh = EXCLUDED.p256dh,
                auth_secret = EXCLUDED.auth_secret, app_id = EXCLUDED.app_id, locale = EXCLUDED.locale,
                time_zone = EXCLUDED.time_zone, app_version = EXCLUDED.app_version, registered_at = now()
            RETURNING \(unescaped: Self.columns)
            """
        )
        return (try Self.record(rows[0]), previousOwner?.lowercased() != user)
    }

    /// Removes `user`'s devices beyond the `keep` most recently registered.
    func trim(_ user: String, keep: Int, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            DELETE FROM devices WHERE user_id = \(user)::uuid AND device_id NOT IN
                (SELECT device_id FROM devices WHERE user_id = \(user)::uuid
                 ORDER BY registered_at DESC, device_id DESC LIMIT \(keep))
            """
        )
    }

    func list(_ user: String, in runner: some SQLRunner) async throws -> [DeviceRecord] {
        try await runner.query(
            """
            SELECT \(unescaped: Self.columns) FROM devices WHERE user_id = \(user)::uuid
            ORDER BY registered_at DESC, device_id DESC
            """
        ).map(Self.record)
    }

    /// The statement reading the devices of each of `users` (the sender reads a claimed batch's at once, with its other
    /// reads: ``ClaimedBatch``).
    func listQuery(_ users: [String]) -> PostgresQuery {
        """
        SELECT \(unescaped: Self.columns), user_id::text FROM devices WHERE user_id = ANY(\(users)::uuid[])
        ORDER BY registered_at DESC, device_id DESC
        """
    }

    /// The devices ``listQuery(_:)`` read, by member, newest first.
    func devices(from rows: PostgresRows) throws -> [String: [DeviceRecord]] {
        var devices: [String: [DeviceRecord]] = [:]
        for row in rows {
            devices[try row.decode(String.self, at: 11), default: []].append(try Self.record(row))
        }
        return devices
    }

    /// Removes one of `user`'s devices by id; false when they have none with it.
    func remove(id: String, of user: String, in runner: some SQLRunner) async throws -> Bool {
        try await runner.execute(
            "DELETE FROM devices WHERE device_id = \(id)::uuid AND user_id = \(user)::uuid") > 0
    }

    /// Removes one of `user`'s devices by platform and token; false when they have none with it.
    func remove(platform: DevicePlatform, token: String, of user: String, in runner: some SQLRunner) async throws -> Bool {
        try await runner.execute(
            """
            DELETE FROM devices WHERE platform = \(platform.rawValue) AND token = \(token) AND user_id = \(user)::uuid
            """
        ) > 0
    }

    /// The sessions devices were registered under (for the sweep that removes those of ended sessions).
    func sessions(after: String, limit: Int, in runner: some SQLRunner) async throws -> [String] {
        try await runner.query(
            """
            SELECT DISTINCT session_id FROM devices WHERE session_id IS NOT NULL AND session_id > \(after)
            ORDER BY session_id LIMIT \(limit)
            """
        ).map { try $0.decode(String.self, at: 0) }
    }

    /// Removes every device registered under one of `sessions`; returns how many.
    func remove(sessions: [String], in runner: some SQLRunner) async throws -> Int {
        try await runner.execute("DELETE FROM devices WHERE session_id = ANY(\(sessions)::text[])")
    }

    /// The time zone of `user`'s most recently registered device, if any.
    func latestTimeZone(of user: String, in runner: some SQLRunner) async throws -> String? {
        try await runner.query(
            "SELECT time_zone FROM devices WHERE user_id = \(user)::uuid ORDER BY registered_at DESC LIMIT 1"
        ).first?.decode(String.self, at: 0)
    }

    func deleteAll(of user: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM devices WHERE user_id = \(user)::uuid")
    }

    func count(of user: String, in runner: some SQLRunner) async throws -> Int64 {
        try await runner.query("SELECT count(*) FROM devices WHERE user_id = \(user)::uuid").scalar(Int64.self)
    }

    private static func record(_ row: PostgresRow) throws -> DeviceRecord {
        let (id, platform, token, app, locale, zone, version, created, registered, p256dh, authSecret) = try row.decode(
            (String, String, String, String, String, String, String, Int64, Int64, String?, String?).self)
        return DeviceRecord(
            deviceID: id, platform: DevicePlatform(rawValue: platform) ?? .apns, token: token, appID: app, locale: locale,
            timeZone: zone, appVersion: version, createdUnixMs: created, registeredUnixMs: registered, p256dh: p256dh,
            authSecret: authSecret)
    }
}
