import KindredPostgres

/// What the sender needs to know about a batch of notifications it claimed, read with one query per table for the
/// whole batch, all in one round trip (a pipeline: one snapshot): the recipients' settings and devices, the devices
/// each notification reached on earlier attempts, and the likes each digest still stands for.
struct ClaimedBatch: Sendable {
    var notifications: [QueuedNotification]
    /// By member; a member without a row has the defaults.
    var preferences: [String: NotificationPreferences]
    /// By member, most recently registered first.
    var devices: [String: [DeviceRecord]]
    /// By notification.
    var delivered: [String: Set<String>]
    /// By likes digest: the likes it stands for now (a block or a match may have taken some out); absent: none.
    var likes: [String: Int]
    /// Chat's answers about the notifications with a device left to reach (``NotificationSender/askChat(about:)``), by
    /// notification; absent: chat did not answer.
    var contexts: [String: ChatContext] = [:]

    static func read(
        _ notifications: [QueuedNotification], sender: NotificationSender, in database: PostgresClient
    ) async throws -> ClaimedBatch {
        let users = Array(Set(notifications.map(\.user)))
        let digests = notifications.filter { $0.kind == .likes }.map(\.id)
        var statements = [
            sender.settings.preferencesQuery(of: users),
            sender.devices.listQuery(users),
            sender.notifications.deliveredDevicesQuery(of: notifications.map(\.id)),
        ]
        if !digests.isEmpty { statements.append(sender.digests.countsQuery(of: digests)) }
        let rows = try await database.pipeline(statements)
        return ClaimedBatch(
            notifications: notifications,
            preferences: try sender.settings.preferences(from: rows[0]),
            devices: try sender.devices.devices(from: rows[1]),
            delivered: try sender.notifications.deliveredDevices(from: rows[2]),
            likes: digests.isEmpty ? [:] : try sender.digests.counts(from: rows[3]))
    }

    func preferences(of user: String) -> NotificationPreferences { self.preferences[user] ?? .defaults }
}
