import KindredPostgres

/// What the sender needs to know about a batch of notifications it claimed, read with one query per table for the
/// whole batch rather than several round trips per notification: the recipients' settings and devices, the devices
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

    static func read(
        _ notifications: [QueuedNotification], sender: NotificationSender, in runner: some SQLRunner
    ) async throws -> ClaimedBatch {
        let users = Array(Set(notifications.map(\.user)))
        let ids = notifications.map(\.id)
        let digests = notifications.filter { $0.kind == .likes }.map(\.id)
        return ClaimedBatch(
            notifications: notifications,
            preferences: try await sender.settings.preferences(of: users, in: runner),
            devices: try await sender.devices.list(users, in: runner),
            delivered: try await sender.notifications.deliveredDevices(of: ids, in: runner),
            likes: digests.isEmpty ? [:] : try await sender.digests.counts(of: digests, in: runner))
    }

    func preferences(of user: String) -> NotificationPreferences { self.preferences[user] ?? .defaults }
}
