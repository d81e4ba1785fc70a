import ArgumentParser
import Foundation
import KindredGRPC
import KindredProto

private typealias NotificationAPI = Kindred.Api.V1.NotificationService.Method

/// `kindred devices [list | add | remove]`: the devices notifications reach (APNs, FCM, Web Push).
struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List, add or remove the devices your notifications reach.",
        subcommands: [List.self, Add.self, Remove.self],
        defaultSubcommand: List.self
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your devices, most recently registered first.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let devices = try await invocation.gateway.authenticated(NotificationAPI.listDevices, .init()).devices
                if devices.isEmpty { Console.out("no devices") }
                for device in devices {
                    Console.out(
                        "\(device.deviceId)  \(DevicesCommand.name(device.platform))  …\(device.tokenHint)  "
                            + "\(device.appId)  \(device.locale)  \(device.timeZone)  \(Render.time(device.registeredUnixMs))")
                }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a device (apps do this themselves; useful for trying a push service out).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "apns, fcm or web-push.") var platform: String
        @Option(help: "APNs device token (hex) or FCM registration token.") var token: String = ""
        @Option(help: "Web Push: the subscription's endpoint URL.") var endpoint: String = ""
        @Option(help: "Web Push: the subscription's p256dh key (base64url).") var p256dh: String = ""
        @Option(help: "Web Push: the subscription's auth secret (base64url).") var auth: String = ""
        @Option(help: "The app's bundle id or application id.") var appID: String = "dev.kindred.cli"
        @Option(help: "Language tag of the texts, e.g. en-GB.") var locale: String = ""
        @Option(help: "IANA time zone, e.g. Europe/Paris.") var timeZone: String = ""

        func run() async throws {
            guard let platform = DevicesCommand.platform(self.platform) else {
                throw CLIError.usage("platform must be apns, fcm or web-push")
            }
            try await Invocation.run(self.global) { invocation in
                var request = Kindred.Api.V1.RegisterDeviceRequest()
                request.platform = platform
                request.token = self.token
                if platform == .webPush {
                    request.webPush = .with {
                        $0.endpoint = self.endpoint
                        $0.p256dh = self.p256dh
                        $0.auth = self.auth
                    }
                }
                request.appId = self.appID
                request.locale = self.locale
                request.timeZone = self.timeZone
                request.appVersion = "kindred-cli"
                let response = try await invocation.gateway.authenticated(NotificationAPI.registerDevice, request)
                Console.out("\(response.created ? "Registered" : "Refreshed") device \(response.device?.deviceId ?? "").")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove one of your devices by id.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The device id (see `kindred devices`).") var deviceID: String

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    NotificationAPI.unregisterDevice, .with { $0.deviceId = self.deviceID })
                Console.out(response.removed ? "Removed." : "No such device.")
            }
        }
    }

    static func platform(_ name: String) -> Kindred.Api.V1.PushPlatform? {
        switch name.lowercased() {
        case "apns": .apns
        case "fcm": .fcm
        case "web-push", "webpush", "web_push": .webPush
        default: nil
        }
    }

    static func name(_ platform: Kindred.Api.V1.PushPlatform) -> String {
        switch platform {
        case .apns: "apns"
        case .fcm: "fcm"
        case .webPush: "web-push"
        default: "unknown"
        }
    }
}

/// `kindred notifications [show | set]`: what you are told about, quiet hours, message text on the lock screen.
struct NotificationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications",
        abstract: "Show or change what you are notified about.",
        subcommands: [Show.self, Set.self],
        defaultSubcommand: Show.self
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show your notification settings.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let settings = try await invocation.gateway.authenticated(NotificationAPI.getNotificationSettings, .init())
                NotificationsCommand.print(settings)
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change your notification settings (the ones not named stay as they are).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "New matches and connections: on or off.") var matches: Toggle?
        @Option(help: "New messages: on or off.") var messages: Toggle?
        @Option(help: "Likes received: on or off.") var likes: Toggle?
        @Option(help: "Report outcomes: on or off.") var reports: Toggle?
        @Option(help: "Activities of members you follow (\"working out now\"): on or off.") var activities: Toggle?
        @Option(help: "Message text on the lock screen: on or off.") var messageText: Toggle?
        @Option(help: "Quiet hours as HH:MM-HH:MM in your time zone, or off.") var quietHours: String?
        @Option(help: "Let new matches through during quiet hours: on or off.") var quietAllowsMatches: Toggle?
        @Option(help: "IANA time zone of the quiet hours, e.g. Europe/Paris (empty: your latest device's).")
        var timeZone: String?

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                var settings = try await invocation.gateway.authenticated(NotificationAPI.getNotificationSettings, .init())
                if let value = self.matches { settings.newMatch = value.isOn }
                if let value = self.messages { settings.newMessage = value.isOn }
                if let value = self.likes { settings.likesReceived = value.isOn }
                if let value = self.reports { settings.reportOutcome = value.isOn }
                if let value = self.activities { settings.activities = value.isOn }
                if let value = self.messageText { settings.showMessageText = value.isOn }
                if let zone = self.timeZone { settings.timeZone = zone }
                var quiet = settings.quietHours ?? .init()
                if let value = self.quietAllowsMatches { quiet.allowMatches = value.isOn }
                if let span = self.quietHours {
                    if span == "off" {
                        quiet.enabled = false
                    } else {
                        guard let (start, end) = NotificationsCommand.span(span) else {
                            throw CLIError.usage("--quiet-hours takes HH:MM-HH:MM, e.g. 22:00-07:00, or off")
                        }
                        quiet.enabled = true
                        quiet.startMinute = start
                        quiet.endMinute = end
                    }
                }
                settings.quietHours = quiet
                let saved = try await invocation.gateway.authenticated(
                    NotificationAPI.updateNotificationSettings, .with { $0.settings = settings })
                NotificationsCommand.print(saved)
            }
        }
    }

    enum Toggle: String, ExpressibleByArgument {
        case on, off
        var isOn: Bool { self == .on }
    }

    static func print(_ settings: Kindred.Api.V1.NotificationSettings) {
        func flag(_ on: Bool) -> String { on ? "on" : "off" }
        Console.out("new matches     \(flag(settings.newMatch))")
        Console.out("new messages    \(flag(settings.newMessage))")
        Console.out("likes received  \(flag(settings.likesReceived))")
        Console.out("report outcomes \(flag(settings.reportOutcome))")
        Console.out("activities      \(flag(settings.activities))")
        Console.out("message text    \(flag(settings.showMessageText))")
        let quiet = settings.quietHours ?? .init()
        let zone = settings.timeZone.isEmpty ? "your latest device's time zone" : settings.timeZone
        Console.out(
            quiet.enabled
                ? "quiet hours     \(Self.clock(quiet.startMinute))-\(Self.clock(quiet.endMinute)) (\(zone))"
                    + (quiet.allowMatches ? ", new matches still come through" : "")
                : "quiet hours     off")
    }

    /// "22:00-07:00" as minutes after midnight.
    static func span(_ text: String) -> (Int32, Int32)? {
        let ends = text.split(separator: "-")
        guard ends.count == 2, let start = Self.minute(ends[0]), let end = Self.minute(ends[1]) else { return nil }
        return (start, end)
    }

    static func minute(_ text: Substring) -> Int32? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let hour = Int32(parts[0]), let minute = Int32(parts[1]), (0..<24).contains(hour),
            (0..<60).contains(minute)
        else { return nil }
        return hour * 60 + minute
    }

    static func clock(_ minute: Int32) -> String {
        String(format: "%02d:%02d", minute / 60, minute % 60)
    }
}
