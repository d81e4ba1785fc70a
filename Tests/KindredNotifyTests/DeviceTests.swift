import Foundation
import KindredGRPC
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@Suite("Notify devices and settings against PostgreSQL")
struct DeviceTests {
    @Test func registerIsIdempotentPerToken() async throws {
        try await NotifyHarness.with { harness in
            let member = try NotifyHarness.member()
            let first = try await harness.register(member.token, device: "fcm-token-1")
            let again = try await harness.register(member.token, device: "fcm-token-1", locale: "de-DE")
            #expect(first.created && !again.created)
            #expect(first.device?.deviceId == again.device?.deviceId)
            #expect(again.device?.locale == "de-DE")
            #expect(again.device?.tokenHint == "oken-1")
            let devices = try await harness.devices(member.token)
            #expect(devices.count == 1)
        }
    }

    @Test func aTokenMovesToTheAccountThatRegistersItLast() async throws {
        try await NotifyHarness.with { harness in
            let first = try NotifyHarness.member()
            let second = try NotifyHarness.member()
            let old = try await harness.register(first.token, platform: .apns, device: String(repeating: "0a", count: 32))
            let moved = try await harness.register(second.token, platform: .apns, device: String(repeating: "0A", count: 32))
            #expect(moved.created)
            #expect(moved.device?.deviceId != old.device?.deviceId)
            #expect(try await harness.devices(first.token).isEmpty)
            #expect(try await harness.devices(second.token).map(\.deviceId) == [moved.device!.deviceId])
            // The old id names nothing of the first member any more, and is not the second member's to remove.
            let removed = try await harness.client.call(
                N.unregisterDevice, .with { $0.deviceId = old.device!.deviceId }, token: first.token)
            #expect(!removed.removed)
        }
    }

    @Test func unregisterByIdOrTokenOnlyTheOwnersDevice() async throws {
        try await NotifyHarness.with { harness in
            let owner = try NotifyHarness.member()
            let other = try NotifyHarness.member()
            let device = try await harness.register(owner.token, device: "fcm-a").device!
            _ = try await harness.register(owner.token, device: "fcm-b")
            let foreign = try await harness.client.call(
                N.unregisterDevice, .with { $0.deviceId = device.deviceId }, token: other.token)
            #expect(!foreign.removed)
            let byID = try await harness.client.call(
                N.unregisterDevice, .with { $0.deviceId = device.deviceId }, token: owner.token)
            #expect(byID.removed)
            let byToken = try await harness.client.call(
                N.unregisterDevice, .with { $0.platform = .fcm; $0.token = "fcm-b" }, token: owner.token)
            #expect(byToken.removed)
            #expect(try await harness.devices(owner.token).isEmpty)
        }
    }

    @Test func theOldestDeviceGoesPastTheLimit() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_MAX_DEVICES_PER_USER": "3"]) { harness in
            let member = try NotifyHarness.member()
            for index in 1...4 { _ = try await harness.register(member.token, device: "fcm-\(index)") }
            let hints = try await harness.devices(member.token).map(\.tokenHint)
            #expect(hints == ["fcm-4", "fcm-3", "fcm-2"])
        }
    }

    @Test func badInputChangesNothing() async throws {
        try await NotifyHarness.with { harness in
            let member = try NotifyHarness.member()
            var request = Notify.RegisterDeviceRequest()
            request.platform = .webPush
            request.appId = "web"
            request.webPush = .with {
                $0.endpoint = "http://127.0.0.1:9/internal"
                $0.p256dh = DeviceRegistrationTests.p256dh
                $0.auth = DeviceRegistrationTests.auth
            }
            #expect(await harness.client.failureCode(N.registerDevice, request, token: member.token) == .invalidArgument)
            var settings = Notify.UpdateNotificationSettingsRequest()
            settings.settings = .with { $0.quietHours = .with { $0.startMinute = 5000 } }
            #expect(
                await harness.client.failureCode(N.updateNotificationSettings, settings, token: member.token)
                    == .invalidArgument)
            #expect(try await harness.devices(member.token).isEmpty)
            #expect(try await harness.footprint(member.id) == ["devices": 0, "settings": 0, "notifications": 0, "digest_likes": 0, "blocks": 0, "webhook_deliveries": 0])
            // Without a token, or with a service token, no member's devices.
            #expect(await harness.client.failureCode(N.listDevices, .init(), token: "x") == .unauthenticated)
            #expect(
                await harness.client.failureCode(N.listDevices, .init(), token: testKeys.serviceToken("gateway"))
                    == .permissionDenied)
        }
    }

    @Test func settingsDefaultThenReplace() async throws {
        try await NotifyHarness.with { harness in
            let member = try NotifyHarness.member()
            let defaults = try await harness.client.call(N.getNotificationSettings, .init(), token: member.token)
            #expect(defaults.newMatch && defaults.newMessage && !defaults.showMessageText)
            var update = Notify.UpdateNotificationSettingsRequest()
            update.settings = .with {
                $0.newMatch = true
                $0.newMessage = false
                $0.timeZone = "Europe/Paris"
                $0.quietHours = .with { $0.enabled = true; $0.startMinute = 1320; $0.endMinute = 420 }
            }
            let saved = try await harness.client.call(N.updateNotificationSettings, update, token: member.token)
            #expect(saved == update.settings)
            let read = try await harness.client.call(N.getNotificationSettings, .init(), token: member.token)
            #expect(read == update.settings)
        }
    }

    @Test func deletionLeavesZeroRows() async throws {
        try await NotifyHarness.with { harness in
            let member = try NotifyHarness.member()
            let neighbour = try NotifyHarness.member()
            _ = try await harness.register(member.token, device: "fcm-x")
            _ = try await harness.register(neighbour.token, device: "fcm-y")
            var update = Notify.UpdateNotificationSettingsRequest()
            update.settings = .with { $0.newMatch = true }
            _ = try await harness.client.call(N.updateNotificationSettings, update, token: member.token)
            #expect(try await harness.footprint(member.id) == ["devices": 1, "settings": 1, "notifications": 0, "digest_likes": 0, "blocks": 0, "webhook_deliveries": 0])
            var event = Kindred.Common.V1.Event()
            event.eventId = try UUIDv7.generate()
            event.userId = member.id
            event.payload = .accountDeleted(.init())
            let acknowledged = try await harness.client.deliver(N.deliverEvents, [event], from: "auth", tokens: testKeys)
            #expect(acknowledged.count == 1)
            // Delivered again (at least once): nothing more happens.
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "auth", tokens: testKeys)
            #expect(try await harness.footprint(member.id) == ["devices": 0, "settings": 0, "notifications": 0, "digest_likes": 0, "blocks": 0, "webhook_deliveries": 0])
            #expect(try await harness.footprint(neighbour.id) == ["devices": 1, "settings": 0, "notifications": 0, "digest_likes": 0, "blocks": 0, "webhook_deliveries": 0])
            // Only notify's producers (auth, match) send it events.
            #expect(
                await harness.client.failureCode(
                    N.deliverEvents, .with { $0.events = [event] }, token: testKeys.serviceToken("profile"))
                    == .permissionDenied)
        }
    }
}
