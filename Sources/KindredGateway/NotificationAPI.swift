import KindredGRPC
import KindredProto

/// `kindred.api.v1.NotificationService`: the caller's devices and notification settings, served by the notify
/// service. The caller's token goes along: notify takes the member (and the session a device is registered
/// under) from it.
struct NotificationAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        typealias M = Api.NotificationService.Method
        typealias N = NotifyApi.NotifyService.Method
        let gateway = self.gateway

        router.unary(M.registerDevice) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = NotifyApi.RegisterDeviceRequest()
            forwarded.platform = NotifyApi.PushPlatform(rawValue: request.platform.rawValue)
            forwarded.token = request.token
            forwarded.webPush = request.webPush.map { subscription in
                .with {
                    $0.endpoint = subscription.endpoint
                    $0.p256dh = subscription.p256dh
                    $0.auth = subscription.auth
                }
            }
            forwarded.appId = request.appId
            forwarded.locale = request.locale
            forwarded.timeZone = request.timeZone
            forwarded.appVersion = request.appVersion
            let response = try await gateway.requireNotify().call(N.registerDevice, forwarded, as: caller)
            var answer = Api.RegisterDeviceResponse()
            answer.device = response.device.map(Api.Device.init)
            answer.created = response.created
            return answer
        }
        router.unary(M.unregisterDevice) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = NotifyApi.UnregisterDeviceRequest()
            forwarded.deviceId = request.deviceId
            forwarded.platform = NotifyApi.PushPlatform(rawValue: request.platform.rawValue)
            forwarded.token = request.token
            forwarded.webPushEndpoint = request.webPushEndpoint
            let response = try await gateway.requireNotify().call(N.unregisterDevice, forwarded, as: caller)
            return Api.UnregisterDeviceResponse.with { $0.removed = response.removed }
        }
        router.unary(M.listDevices) { _, context in
            let caller = try await gateway.admit(context, .user)
            let response = try await gateway.requireNotify().call(N.listDevices, .init(), as: caller)
            return Api.ListDevicesResponse.with { $0.devices = response.devices.map(Api.Device.init) }
        }
        router.unary(M.getNotificationSettings) { _, context in
            let caller = try await gateway.admit(context, .user)
            let settings = try await gateway.requireNotify().call(N.getNotificationSettings, .init(), as: caller)
            return Api.NotificationSettings(settings)
        }
        router.unary(M.updateNotificationSettings) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = NotifyApi.UpdateNotificationSettingsRequest()
            forwarded.settings = NotifyApi.NotificationSettings(request.settings ?? .init())
            let settings = try await gateway.requireNotify().call(N.updateNotificationSettings, forwarded, as: caller)
            return Api.NotificationSettings(settings)
        }
    }
}

extension Api.Device {
    init(_ device: NotifyApi.Device) {
        self.init()
        self.deviceId = device.deviceId
        self.platform = Api.PushPlatform(rawValue: device.platform.rawValue)
        self.tokenHint = device.tokenHint
        self.appId = device.appId
        self.locale = device.locale
        self.timeZone = device.timeZone
        self.appVersion = device.appVersion
        self.createdUnixMs = device.createdUnixMs
        self.registeredUnixMs = device.registeredUnixMs
    }
}

extension Api.NotificationSettings {
    init(_ settings: NotifyApi.NotificationSettings) {
        self.init()
        self.newMatch = settings.newMatch
        self.newMessage = settings.newMessage
        self.likesReceived = settings.likesReceived
        self.activities = settings.activities
        self.reportOutcome = settings.reportOutcome
        self.timeZone = settings.timeZone
        self.showMessageText = settings.showMessageText
        self.webPushApplicationServerKey = settings.webPushApplicationServerKey
        self.quietHours = settings.quietHours.map { quiet in
            .with {
                $0.enabled = quiet.enabled
                $0.startMinute = quiet.startMinute
                $0.endMinute = quiet.endMinute
                $0.allowMatches = quiet.allowMatches
            }
        }
    }
}

extension NotifyApi.NotificationSettings {
    init(_ settings: Api.NotificationSettings) {
        self.init()
        self.newMatch = settings.newMatch
        self.newMessage = settings.newMessage
        self.likesReceived = settings.likesReceived
        self.activities = settings.activities
        self.reportOutcome = settings.reportOutcome
        self.timeZone = settings.timeZone
        self.showMessageText = settings.showMessageText
        self.quietHours = settings.quietHours.map { quiet in
            .with {
                $0.enabled = quiet.enabled
                $0.startMinute = quiet.startMinute
                $0.endMinute = quiet.endMinute
                $0.allowMatches = quiet.allowMatches
            }
        }
    }
}
