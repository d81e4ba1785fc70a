import Foundation
import KindredProto
import KindredServiceKit
import Testing

@testable import KindredNotify

@Suite("Webhook rules as values: retry schedule, signature, outcomes, URLs, event bodies")
struct WebhookRulesTests {
    // MARK: Retry schedule

    /// Defaults: 5 s × 3 per attempt up to 3 h, ± 20 % jitter (random 0 = -20 %, 0.5 = exact, 1 = +20 %).
    @Test(arguments: [
        (1, 0.5, 5_000), (2, 0.5, 15_000), (3, 0.5, 45_000), (4, 0.5, 135_000), (8, 0.5, 10_800_000),
        (30, 0.5, 10_800_000), (1, 0.0, 4_000), (1, 1.0, 6_000), (3, 0.0, 36_000), (8, 1.0, 12_960_000),
    ])
    func theDelayGrowsExponentiallyWithJitter(attempts: Int, random: Double, milliseconds: Int64) {
        #expect(WebhookRetrySchedule().delay(attempts: attempts, random: random) == .milliseconds(milliseconds))
    }

    @Test func retriesStopADayAfterTheDeliveryWasQueued() {
        let schedule = WebhookRetrySchedule()
        #expect(schedule.next(attempts: 1, elapsed: .seconds(1), random: 0.5) == .retry(after: .seconds(5)))
        // The last retry falls on the day's mark, not after it; a failure at or after the mark gives up.
        #expect(schedule.next(attempts: 9, elapsed: .seconds(86_000), random: 0.5) == .retry(after: .seconds(400)))
        #expect(schedule.next(attempts: 10, elapsed: .seconds(86_400), random: 0.5) == .giveUp)
        #expect(schedule.next(attempts: 2, elapsed: .seconds(90_000), random: 0.5) == .giveUp)
    }

    @Test func theWholeScheduleSpansADayInAboutFifteenAttempts() {
        let schedule = WebhookRetrySchedule()
        var elapsed = Duration.zero
        var attempts = 0
        while case .retry(let after) = schedule.next(attempts: attempts + 1, elapsed: elapsed, random: 0.5) {
            attempts += 1
            elapsed += after
        }
        #expect(elapsed == .seconds(86_400))
        #expect((12...16).contains(attempts), "\(attempts) retries")
    }

    @Test func anEndpointsRetryAfterIsHonouredUpToTheLongestDelay() {
        let schedule = WebhookRetrySchedule()
        #expect(
            schedule.next(attempts: 1, elapsed: .zero, retryAfter: .seconds(60), random: 0.5)
                == .retry(after: .seconds(60))
        )
        #expect(
            schedule.next(attempts: 4, elapsed: .zero, retryAfter: .seconds(1), random: 0.5)
                == .retry(after: .seconds(135))
        )
        #expect(
            schedule.next(attempts: 1, elapsed: .zero, retryAfter: .seconds(86_400), random: 0.5)
                == .retry(after: .seconds(10_800))
        )
    }

    // MARK: Signature

    /// The Standard Webhooks specification's own example (its reference libraries test against it).
    @Test func theSignatureMatchesTheSpecificationsExample() throws {
        let secret = try #require(WebhookSecret(text: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let header = WebhookSignature.header(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
            timestamp: 1_614_265_330,
            body: Array(#"{"test": 2432232314}"#.utf8),
            secrets: [secret]
        )
        #expect(header == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test func duringAGracePeriodBothSecretsSignSpaceSeparated() throws {
        let current = try WebhookSecret.generate()
        let previous = try WebhookSecret.generate()
        let both = WebhookSignature.header(id: "m", timestamp: 1, body: [1, 2], secrets: [current, previous])
        let parts = both.split(separator: " ").map(String.init)
        #expect(parts.count == 2)
        #expect(parts[0] == WebhookSignature.header(id: "m", timestamp: 1, body: [1, 2], secrets: [current]))
        #expect(parts[1] == WebhookSignature.header(id: "m", timestamp: 1, body: [1, 2], secrets: [previous]))
    }

    @Test func secretsAreWhsecAndBase64OfRandomBytes() throws {
        let secret = try WebhookSecret.generate()
        #expect(secret.key.count == 32 && secret.text.hasPrefix("whsec_"))
        #expect(WebhookSecret(text: secret.text) == secret)
        #expect(try WebhookSecret.generate() != secret)
        #expect(WebhookSecret(text: "whsec_" + Data(count: 16).base64EncodedString()) == nil)
        #expect(WebhookSecret(text: "sk_" + Data(count: 32).base64EncodedString()) == nil)
    }

    // MARK: Outcomes

    @Test(
        arguments: [
            (200, nil, WebhookAttemptOutcome.delivered), (204, nil, .delivered), (299, nil, .delivered),
            (410, nil, .gone), (429, "7", .slowDown(retryAfter: .seconds(7))), (429, nil, .slowDown(retryAfter: nil)),
            (429, "Wed, 21 Oct 2015 07:28:00 GMT", .slowDown(retryAfter: nil)),
            (429, "999999", .slowDown(retryAfter: .seconds(86_400))), (500, "5", .failed(error: "HTTP 500")),
            (404, nil, .failed(error: "HTTP 404")), (301, nil, .failed(error: "HTTP 301")),
        ] as [(Int, String?, WebhookAttemptOutcome)]
    )
    func theEndpointsAnswerDecides(status: Int, retryAfter: String?, outcome: WebhookAttemptOutcome) {
        #expect(WebhookAttemptOutcome(status: status, retryAfter: retryAfter) == outcome)
    }

    // MARK: URLs

    @Test(arguments: [
        ("https://hooks.example.com/kindred", true, "hooks.example.com", 443, "/kindred"),
        ("https://hooks.example.com:8443/a?b=c", true, "hooks.example.com", 8443, "/a?b=c"),
        ("https://Example.COM", true, "example.com", 443, "/"),
        ("http://127.0.0.1:9000/hook", false, "127.0.0.1", 9000, "/hook"),
        ("http://localhost/hook", false, "localhost", 80, "/hook"),
    ])
    func urlsTheServicePostsTo(text: String, secure: Bool, host: String, port: Int, path: String) throws {
        let url = try WebhookURL(text, httpHosts: ["localhost", "127.0.0.1"], allowPrivateHosts: true)
        #expect(url.secure == secure && url.host == host && url.port == port && url.path == path)
    }

    @Test(arguments: [
        "", "hooks.example.com/x", "ftp://example.com/x", "http://example.com/hook", "http://10.0.0.1/hook",
        "https://", "https://user:pw@example.com/x", "https://example.com/a b", "https://example.com/#frag",
        "https://example.com:0/x", "https://example.com:99999/x", "https://exämple.com/x",
        "https://example.com/" + String(repeating: "a", count: 2048),
    ])
    func urlsRefused(text: String) {
        #expect(throws: WebhookURL.Invalid.self) { try WebhookURL(text, httpHosts: ["localhost", "127.0.0.1"]) }
    }

    // MARK: Event bodies

    static func event(_ payload: Kindred.Common.V1.Event.Payload, user: String) throws -> Kindred.Common.V1.Event {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.userId = user
        event.producer =
            switch payload {
            case .matchCreated, .matchEnded: "match"
            case .messageSent: "chat"
            default: "auth"
            }
        event.communityId = "dating"
        event.occurredUnixMs = 1_764_201_600_123
        event.payload = payload
        return event
    }

    @Test func aMatchBecomesIdsOnly() throws {
        let (ann, bob, match) = (try UUIDv7.generate(), try UUIDv7.generate(), try UUIDv7.generate())
        let event = try Self.event(
            .matchCreated(
                .with {
                    $0.matchId = match
                    $0.userIds = [ann, bob]
                    $0.initiatorUserId = ann
                    $0.mode = .mutual
                }
            ),
            user: ann
        )
        let webhook = try #require(WebhookEvent(event))
        #expect(webhook.type == "match.created" && webhook.userIDs == [ann, bob])
        #expect(
            webhook.body
                == #"{"data":{"community_id":"dating","match_id":"\#(match)","mode":"mutual","user_ids":["\#(ann)","\#(bob)"]},"#
                + #""timestamp":"2025-11-27T00:00:00.123Z","type":"match.created"}"#
        )
    }

    @Test func anEndedMatchSaysNeitherWhoNorWhy() throws {
        let (ann, bob, match) = (try UUIDv7.generate(), try UUIDv7.generate(), try UUIDv7.generate())
        let event = try Self.event(
            .matchEnded(
                .with {
                    $0.matchId = match
                    $0.userIds = [ann, bob]
                    $0.endedByUserId = ann
                    $0.reason = .blocked
                }
            ),
            user: ann
        )
        let webhook = try #require(WebhookEvent(event))
        #expect(webhook.type == "match.ended")
        #expect(
            !webhook.body.contains("blocked") && !webhook.body.contains("ended_by") && !webhook.body.contains("reason")
        )
    }

    @Test func theDeletionNoticeNamesTheMemberButIsNotAboutThem() throws {
        let gone = try UUIDv7.generate()
        let webhook = try #require(WebhookEvent(try Self.event(.accountDeleted(.init()), user: gone)))
        #expect(webhook.type == "account.deleted" && webhook.userIDs.isEmpty)
        // Another producer's AccountDeleted is its outbox's erasure notice, not a second account.deleted.
        var notice = try Self.event(.accountDeleted(.init()), user: gone)
        notice.producer = "chat"
        #expect(WebhookEvent(notice) == nil)
        #expect(webhook.body.contains(#""data":{"community_id":"dating","user_id":"\#(gone)"}"#))
    }

    @Test func aMessageIsNamedByIdsNeverByItsText() throws {
        let (ann, bob, thread, message) = (
            try UUIDv7.generate(), try UUIDv7.generate(), try UUIDv7.generate(), try UUIDv7.generate()
        )
        let event = try Self.event(
            .messageSent(
                .with {
                    $0.threadId = thread
                    $0.messageId = message
                    $0.recipientUserId = bob
                    $0.sentUnixMs = 1
                }), user: ann)
        let webhook = try #require(WebhookEvent(event))
        #expect(webhook.type == "message.sent" && webhook.userIDs == [ann, bob])
        #expect(
            webhook.body.contains(
                #""data":{"community_id":"dating","message_id":"\#(message)","recipient_user_id":"\#(bob)","#
                    + #""sender_user_id":"\#(ann)","thread_id":"\#(thread)"}"#))
    }

    @Test func eventsNoEndpointCanAskForMakeNone() throws {
        let user = try UUIDv7.generate()
        #expect(WebhookEvent(try Self.event(.userBlocked(.with { $0.blockedUserId = user }), user: user)) == nil)
        #expect(WebhookEvent(try Self.event(.locationChanged(.init()), user: user)) == nil)
        #expect(WebhookEvent(try Self.event(.matchCreated(.with { $0.userIds = [user] }), user: user)) == nil)
    }
}
