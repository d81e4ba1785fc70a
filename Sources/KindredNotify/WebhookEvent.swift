import Foundation
import KindredProto
import KindredServiceKit

/// What one event becomes for the app team's backend: its webhook type (`match.created`), the JSON body every
/// endpoint hearing about it receives, and the members the body names (an account deletion erases deliveries
/// that name the member).
///
/// The body is `{"data": …, "timestamp": …, "type": …}` as the Standard Webhooks spec shapes it, with ids only:
/// never an email address, a location, a birth date, who ended a match or why (DESIGN §5–6).
struct WebhookEvent: Sendable, Equatable {
    /// The event types an endpoint may ask for, each from one payload notify consumes.
    static let types: Set<String> = [
        "account.deactivated", "account.reactivated", "account.deleted", "match.created", "match.ended",
        "message.sent",
    ]

    let eventID: String
    let type: String
    let body: String
    /// The members `body` names. Empty for `account.deleted`: that notice exists to tell the backend whom to
    /// erase, and goes with the retention purge instead.
    let userIDs: [String]

    /// The webhook of `event`, or nil when it is of a type no endpoint can ask for (or malformed).
    init?(_ event: Kindred.Common.V1.Event) {
        let subject = event.userId.lowercased()
        let community = event.communityId
        var data: [String: Any]
        var users: [String]
        let type: String
        switch event.payload {
        case .accountDeactivated?, .accountReactivated?, .accountDeleted?:
            // Accounts are auth's: other producers' AccountDeleted are their outboxes' erasure notices, and a
            // second `account.deleted` (without the community) would reach the backend for the same member.
            guard event.producer == "auth", UUIDv7.isValid(subject) else { return nil }
            type =
                switch event.payload {
                case .accountDeactivated?: "account.deactivated"
                case .accountReactivated?: "account.reactivated"
                default: "account.deleted"
                }
            data = ["user_id": subject, "community_id": community]
            users = type == "account.deleted" ? [] : [subject]
        case .matchCreated(let match)?:
            users = match.userIds.map { $0.lowercased() }
            guard users.count == 2, users.allSatisfy(UUIDv7.isValid), UUIDv7.isValid(match.matchId) else { return nil }
            type = "match.created"
            data = [
                "match_id": match.matchId.lowercased(), "user_ids": users, "community_id": community,
                "mode": match.mode == .oneWay ? "one_way" : "mutual",
            ]
        case .matchEnded(let ended)?:
            users = ended.userIds.map { $0.lowercased() }
            guard users.count == 2, users.allSatisfy(UUIDv7.isValid), UUIDv7.isValid(ended.matchId) else { return nil }
            type = "match.ended"
            data = ["match_id": ended.matchId.lowercased(), "user_ids": users, "community_id": community]
        case .messageSent(let message)?:
            users = [subject, message.recipientUserId.lowercased()]
            guard users.allSatisfy(UUIDv7.isValid), users[0] != users[1], UUIDv7.isValid(message.threadId),
                UUIDv7.isValid(message.messageId)
            else { return nil }
            type = "message.sent"
            // Never the text: the backend reads it, if at all, through the API as the members' app would.
            data = [
                "thread_id": message.threadId.lowercased(), "message_id": message.messageId.lowercased(),
                "sender_user_id": users[0], "recipient_user_id": users[1], "community_id": community,
            ]
        default:
            return nil
        }
        guard UUIDv7.isValid(event.eventId) else { return nil }
        self.eventID = event.eventId.lowercased()
        self.type = type
        self.userIDs = users
        self.body = Self.json(["type": type, "timestamp": Self.timestamp(unixMs: event.occurredUnixMs), "data": data])
    }

    /// ISO 8601 in UTC with milliseconds, as the spec's examples write it: `2025-11-27T00:00:00.123Z`. The
    /// milliseconds are taken as an integer (a Double of the seconds would turn .123 into .122).
    static func timestamp(unixMs: Int64) -> String {
        let (seconds, milliseconds) = unixMs.quotientAndRemainder(dividingBy: 1000)
        let whole = Date(timeIntervalSince1970: Double(seconds - (milliseconds < 0 ? 1 : 0)))
            .formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false))
        let fraction = (milliseconds + 1000) % 1000
        return (whole.hasSuffix("Z") ? String(whole.dropLast()) : whole) + "." + String(fraction + 1000).dropFirst()
            + "Z"
    }

    /// Compact JSON with sorted keys, so the same event makes the same bytes.
    private static func json(_ object: [String: Any]) -> String {
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
