import KindredPostgres

/// The SQL of notification settings (table `settings`): a row only for members who changed theirs.
struct SettingsStore: Sendable {
    private static let columns = """
        new_match, new_message, likes_received, report_outcome, quiet_enabled, quiet_start_minute, quiet_end_minute,
        quiet_allow_matches, time_zone, show_message_text, activities
        """

    /// `user`'s settings, or the defaults.
    func preferences(of user: String, in runner: some SQLRunner) async throws -> NotificationPreferences {
        guard
            let row = try await runner.query(
                "SELECT \(unescaped: Self.columns) FROM settings WHERE user_id = \(user)::uuid"
            ).first
        else { return .defaults }
        return try Self.preferences(row)
    }

    /// The statement reading the settings of those of `users` who changed theirs (the others have the defaults): the
    /// sender reads a claimed batch's at once, with its other reads (``ClaimedBatch``).
    func preferencesQuery(of users: [String]) -> PostgresQuery {
        "SELECT \(unescaped: Self.columns), user_id::text FROM settings WHERE user_id = ANY(\(users)::uuid[])"
    }

    /// The settings ``preferencesQuery(of:)`` read, by member.
    func preferences(from rows: PostgresRows) throws -> [String: NotificationPreferences] {
        var preferences: [String: NotificationPreferences] = [:]
        for row in rows {
            preferences[try row.decode(String.self, at: 11)] = try Self.preferences(row)
        }
        return preferences
    }

    private static func preferences(_ row: PostgresRow) throws -> NotificationPreferences {
        let (match, message, likes, report, quiet, start, end, allowMatches, zone, text) = try row.decode(
            (Bool, Bool, Bool, Bool, Bool, Int32, Int32, Bool, String, Bool).self)
        return NotificationPreferences(
            newMatch: match, newMessage: message, likesReceived: likes, reportOutcome: report,
            activities: try row.decode(Bool.self, at: 10),
            quietHours: .init(enabled: quiet, startMinute: Int(start), endMinute: Int(end), allowMatches: allowMatches),
            timeZone: zone, showMessageText: text)
    }

    func save(_ preferences: NotificationPreferences, of user: String, in runner: some SQLRunner) async throws {
        let quiet = preferences.quietHours
        try await runner.execute(
            """
            INSERT INTO settings (user_id, new_match, new_message, likes_received, report_outcome, quiet_enabled,
                                  quiet_start_minute, quiet_end_minute, quiet_allow_matches, time_zone, show_message_text,
                                  activities)
            VALUES (\(user)::uuid, \(preferences.newMatch), \(preferences.newMessage), \(preferences.likesReceived),
                    \(preferences.reportOutcome), \(quiet.enabled), \(Int32(quiet.startMinute)), \(Int32(quiet.endMinute)),
                    \(quiet.allowMatches), \(preferences.timeZone), \(preferences.showMessageText), \(preferences.activities))
            ON CONFLICT (user_id) DO UPDATE SET
                new_match = EXCLUDED.new_match, new_message = EXCLUDED.new_message,
                likes_received = EXCLUDED.likes_received, report_outcome = EXCLUDED.report_outcome,
                quiet_enabled = EXCLUDED.quiet_enabled, quiet_start_minute = EXCLUDED.quiet_start_minute,
                quiet_end_minute = EXCLUDED.quiet_end_minute, quiet_allow_matches = EXCLUDED.quiet_allow_matches,
                time_zone = EXCLUDED.time_zone, show_message_text = EXCLUDED.show_message_text,
                activities = EXCLUDED.activities, updated_at = now()
            """
        )
    }

    func delete(_ user: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM settings WHERE user_id = \(user)::uuid")
    }

    func count(of user: String, in runner: some SQLRunner) async throws -> Int64 {
        try await runner.query("SELECT count(*) FROM settings WHERE user_id = \(user)::uuid").scalar(Int64.self)
    }
}
