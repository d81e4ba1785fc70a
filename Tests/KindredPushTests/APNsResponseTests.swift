import Foundation
import Testing

@testable import KindredPush

/// APNs answers to outcomes, without I/O (Apple's "Handling notification responses from APNs").
@Suite("APNs response to outcome")
struct APNsResponseTests {
    static let table: [(status: Int, retryAfter: String?, reason: String?, outcome: PushOutcome)] = [
        (200, nil, nil, .delivered),
        (410, nil, "Unregistered", .targetGone),
        (410, nil, "ExpiredToken", .targetGone),
        (400, nil, "BadDeviceToken", .targetGone),
        (400, nil, "BadCollapseId", .rejected(reason: "BadCollapseId")),
        (400, nil, "TopicDisallowed", .rejected(reason: "TopicDisallowed")),
        (403, nil, "InvalidProviderToken", .rejected(reason: "InvalidProviderToken")),
        (403, nil, "ExpiredProviderToken", .retryLater(after: nil)),
        (413, nil, "PayloadTooLarge", .rejected(reason: "PayloadTooLarge")),
        (429, "12", "TooManyRequests", .retryLater(after: .seconds(12))),
        (429, nil, "TooManyRequests", .retryLater(after: nil)),
        (500, nil, "InternalServerError", .retryLater(after: nil)),
        (503, "5", "ServiceUnavailable", .retryLater(after: .seconds(5))),
        (503, "Wed, 21 Oct 2015 07:28:00 GMT", "Shutdown", .retryLater(after: nil)),
        (404, nil, nil, .rejected(reason: "HTTP 404")),
    ]

    @Test("status, Retry-After and reason give the outcome", arguments: 0..<Self.table.count)
    func outcome(_ index: Int) {
        let row = Self.table[index]
        let body = row.reason.map { Array(#"{"reason":"\#($0)"}"#.utf8) } ?? []
        #expect(APNsResponse(status: row.status, retryAfter: row.retryAfter, body: body).outcome == row.outcome)
    }

    @Test("Retry-After: seconds, capped at a day; anything else is no hint")
    func retryAfter() {
        #expect(RetryAfter.parse("0") == .seconds(0))
        #expect(RetryAfter.parse(" 30 ") == .seconds(30))
        #expect(RetryAfter.parse("999999") == .seconds(86_400))
        #expect(RetryAfter.parse("-1") == nil)
        #expect(RetryAfter.parse("soon") == nil)
        #expect(RetryAfter.parse(nil) == nil)
    }

    @Test("the payload: aps with alert, badge, sound and thread-id; data beside it; a data key 'aps' is dropped")
    func payload() throws {
        let notification = PushNotification(
            id: "1", title: "Hi", body: "There", collapseKey: "t1", badge: 2, data: ["kind": "message", "aps": "x"]
        )
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(APNsPayload(notification: notification)))
        let object = try #require(json as? [String: Any])
        #expect(Set(object.keys) == ["aps", "kind"])
        let aps = try #require(object["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: String]) == ["title": "Hi", "body": "There"])
        #expect(aps["badge"] as? Int == 2)
        #expect(aps["sound"] as? String == "default")
        #expect(aps["thread-id"] as? String == "t1")
    }
}
