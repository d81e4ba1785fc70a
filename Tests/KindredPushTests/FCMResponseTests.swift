import Testing

@testable import KindredPush

/// FCM answers to outcomes, without I/O (Firebase's "FCM HTTP v1 error codes").
@Suite("FCM response to outcome")
struct FCMResponseTests {
    static func body(_ status: String, _ errorCode: String?) -> [UInt8] {
        let details = errorCode.map {
            #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"#
        } ?? ""
        return Array(#"{"error":{"code":0,"message":"m","status":"\#(status)"\#(details)}}"#.utf8)
    }

    static let table: [(status: Int, retryAfter: String?, errorStatus: String, errorCode: String?, outcome: PushOutcome)] = [
        (404, nil, "NOT_FOUND", "UNREGISTERED", .targetGone),
        (404, nil, "NOT_FOUND", nil, .targetGone),
        (400, nil, "INVALID_ARGUMENT", "UNREGISTERED", .targetGone),
        (400, nil, "INVALID_ARGUMENT", "INVALID_ARGUMENT", .rejected(reason: "INVALID_ARGUMENT")),
        (400, nil, "INVALID_ARGUMENT", nil, .rejected(reason: "INVALID_ARGUMENT")),
        (403, nil, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", .rejected(reason: "SENDER_ID_MISMATCH")),
        (401, nil, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", .retryLater(after: nil)),
        (429, "15", "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", .retryLater(after: .seconds(15))),
        (503, nil, "UNAVAILABLE", "UNAVAILABLE", .retryLater(after: nil)),
        (500, "3", "INTERNAL", "INTERNAL", .retryLater(after: .seconds(3))),
    ]

    @Test("status, Retry-After and the FcmError code give the outcome", arguments: 0..<Self.table.count)
    func outcome(_ index: Int) {
        let row = Self.table[index]
        let response = FCMResponse(status: row.status, retryAfter: row.retryAfter, body: Self.body(row.errorStatus, row.errorCode))
        #expect(response.outcome == row.outcome)
    }

    @Test("a 200 is delivered whatever its body; an error without a JSON body is named by its status")
    func edges() {
        #expect(FCMResponse(status: 200, retryAfter: nil, body: Array(#"{"name":"projects/p/messages/1"}"#.utf8)).outcome == .delivered)
        #expect(FCMResponse(status: 400, retryAfter: nil, body: Array("<html>".utf8)).outcome == .rejected(reason: "HTTP 400"))
    }
}
