import KindredGRPC
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// `RegisterDevice`: idempotent per platform and token; a token held by another account moves to the
    /// caller with a new id. Past the per-account limit the least recently registered device goes.
    func registerDevice(_ request: Notify.RegisterDeviceRequest, _ context: ServerContext) async throws
        -> Notify.RegisterDeviceResponse
    {
        let caller = try await self.access.requireUser(context)
        let (user, session) = (caller.id, caller.sessionID)
        let rules = DeviceRegistration.EndpointRules(
            hosts: self.configuration.webPushHosts, allowHTTP: self.configuration.webPushAllowHTTP)
        let registration = try DeviceRegistration.validate(request, endpoints: rules)
        let newID = try UUIDv7.generate()
        let (device, created) = try await self.database.withTransaction { transaction in
            let result = try await self.devices.register(
                registration, user: user, session: session, newID: newID, in: transaction)
            try await self.devices.trim(user, keep: self.configuration.maxDevicesPerUser, in: transaction)
            return result
        }
        var response = Notify.RegisterDeviceResponse()
        response.device = device.wire
        response.created = created
        return response
    }

    /// `UnregisterDevice`: by id, or by platform and token; idempotent.
    func unregisterDevice(_ request: Notify.UnregisterDeviceRequest, _ context: ServerContext) async throws
        -> Notify.UnregisterDeviceResponse
    {
        let user = try await self.access.requireUser(context).id
        var response = Notify.UnregisterDeviceResponse()
        if !request.deviceId.isEmpty {
            guard UUIDv7.isValid(request.deviceId) else {
                throw NotifyError.invalid("device_id", "MALFORMED", "a device id from ListDevices")
            }
            response.removed = try await self.devices.remove(id: request.deviceId.lowercased(), of: user, in: self.database)
            return response
        }
        guard let platform = DevicePlatform(request.platform) else {
            throw NotifyError.invalid("device_id", "REQUIRED", "a device id, or platform with token")
        }
        let token: String
        switch platform {
        case .apns: token = try DeviceRegistration.apnsToken(request.token)
        case .fcm: token = try DeviceRegistration.fcmToken(request.token)
        case .webPush:
            guard !request.webPushEndpoint.isEmpty else {
                throw NotifyError.invalid("web_push_endpoint", "REQUIRED", "the subscription's endpoint URL")
            }
            token = request.webPushEndpoint
        }
        response.removed = try await self.devices.remove(platform: platform, token: token, of: user, in: self.database)
        return response
    }

    /// `ListDevices`: the caller's devices, most recently registered first; tokens shown only by their end.
    func listDevices(_ request: Notify.ListDevicesRequest, _ context: ServerContext) async throws
        -> Notify.ListDevicesResponse
    {
        let user = try await self.access.requireUser(context).id
        var response = Notify.ListDevicesResponse()
        response.devices = try await self.devices.list(user, in: self.database).map(\.wire)
        return response
    }

    /// Removes the devices of sessions auth says have ended, until cancelled: sign-out removes the devices
    /// registered under that session; sign-out everywhere, deactivation and a password change end every
    /// session and so remove them all. Auth keeps an ended session in its feed for the access tokens' lifetime
    /// (15 minutes), far longer than one pass.
    func sweepEndedSessions() async {
        while !Task.isCancelled {
            do {
                var after = ""
                while true {
                    let sessions = try await self.devices.sessions(after: after, limit: 1_000, in: self.database)
                    guard let last = sessions.last else { break }
                    let ended = sessions.filter { self.auth.sessionHasEnded($0) == true }
                    if !ended.isEmpty {
                        let removed = try await self.devices.remove(sessions: ended, in: self.database)
                        self.logger.info("devices of ended sessions removed", metadata: ["devices.removed": "\(removed)"])
                    }
                    after = last
                }
            } catch {
                self.logger.warning("session sweep failed", metadata: ["error.type": "\(type(of: error))"])
            }
            try? await Task.sleep(for: self.configuration.sessionSweepInterval)
        }
    }
}
