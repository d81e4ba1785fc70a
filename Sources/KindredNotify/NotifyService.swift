import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

typealias Notify = Kindred.Notify.V1

/// `kindred.notify.v1.NotifyService`: devices, notification settings, the events that lead to notifications,
/// and the footprint. Handlers only await: SQL goes through the stores.
///
/// Ownership is checked on every id: a device is found only together with its owner, so someone else's device
/// id and an unknown one get the same answer.
public final class NotifyService: GRPCService, Sendable {
    let configuration: NotifyConfiguration
    let database: PostgresClient
    let auth: AuthConnection
    let inbox: EventInbox
    let logger: Logger
    /// The VAPID public key browsers subscribe with (base64url); empty when Web Push is not configured.
    let webPushApplicationServerKey: String
    /// The SQL, one store per aggregate.
    let devices = DeviceStore()
    let settings = SettingsStore()
    let notifications = NotificationStore()
    let digests = DigestStore()
    let activityNotifications = ActivityNotificationStore()
    let deletedMembers = DeletedMemberStore()
    let blocks = BlockStore()
    /// Wakes the sender once applied events are committed (a notification may be due at once).
    let sendWakeup = SendWakeup()
    /// How messages of one thread become one notification.
    var collapse: MessageCollapse { MessageCollapse(window: self.configuration.messageCollapseWindow) }

    public init(
        configuration: NotifyConfiguration, database: PostgresClient, auth: AuthConnection,
        webPushApplicationServerKey: String = "", logger: Logger
    ) {
        self.configuration = configuration
        self.webPushApplicationServerKey = webPushApplicationServerKey
        self.database = database
        self.auth = auth
        self.inbox = EventInbox(database: database, logger: logger)
        self.logger = logger
    }

    /// Routes call the handlers directly: errors are mapped once, by the runtime (`NotifyError`, `PostgresError`).
    public func register(in router: inout GRPCRouter) {
        typealias M = Notify.NotifyService.Method
        router.unary(M.registerDevice) { try await self.registerDevice($0, $1) }
        router.unary(M.unregisterDevice) { try await self.unregisterDevice($0, $1) }
        router.unary(M.listDevices) { try await self.listDevices($0, $1) }
        router.unary(M.getNotificationSettings) { try await self.getNotificationSettings($0, $1) }
        router.unary(M.updateNotificationSettings) { try await self.updateNotificationSettings($0, $1) }
        router.unary(M.deliverEvents) { try await self.deliverEvents($0, $1) }
        router.unary(M.getUserFootprint) { try await self.getUserFootprint($0, $1) }
    }

    /// Who calls: the kit's one caller check (``ServiceAccess``), with auth's keys and session ends.
    var access: ServiceAccess { self.auth.access }
}
