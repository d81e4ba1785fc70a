import KindredGRPC
import KindredProto

extension NotifyService {
    /// `GetNotificationSettings`: the caller's settings, or the defaults.
    func getNotificationSettings(_ request: Notify.GetNotificationSettingsRequest, _ context: ServerContext)
        async throws -> Notify.NotificationSettings
    {
        let user = try await self.access.requireUser(context).id
        return self.answer(try await self.settings.preferences(of: user, in: self.database))
    }

    /// `UpdateNotificationSettings`: replaces every field; nothing changes when one is invalid.
    func updateNotificationSettings(_ request: Notify.UpdateNotificationSettingsRequest, _ context: ServerContext)
        async throws -> Notify.NotificationSettings
    {
        let user = try await self.access.requireUser(context).id
        let preferences = try NotificationPreferences.validate(request.settings ?? .init())
        try await self.settings.save(preferences, of: user, in: self.database)
        return self.answer(preferences)
    }

    /// The settings as answered: the member's preferences and the deployment's Web Push key.
    private func answer(_ preferences: NotificationPreferences) -> Notify.NotificationSettings {
        var wire = preferences.wire
        wire.webPushApplicationServerKey = self.webPushApplicationServerKey
        return wire
    }
}
