"""Chat's messages, match's likes and report outcomes reaching notify in a running cluster, against the independent APNs and FCM peers of Tests/Peers
(Python `h2` and `cryptography`): chat writes a MessageSent with each message, its relay delivers it to notify, and
notify pushes "New message from <name>" (the name from profile's card) to the recipient's devices, with the unread
total as the badge and the thread as the collapse key. A recipient with a live Subscribe stream (the app open) gets
no push; a burst of messages in one thread is one push; a block cancels what is waiting; message text shows only
when the recipient allowed it. Likes are told as a digest ("3 people liked you") naming nobody, at most once per
interval, without the likes a block took out; a resolved report tells the reporter it was reviewed, nothing more."""

import time

import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer
from test_chat import Subscription
from test_match import BOOTSTRAP_SECRET, ProfileProjection, community, new_user, swipe
from test_consent import Member as FitnessMember, api, channel, follow, send  # noqa: F401 (fixtures)
from test_notify import APNS, FCM, eventually, register
from test_notify_push import apns_token, peers, push_peer_settings, pushes_to  # noqa: F401 (fixture)

from kindred.api.v1 import admin_pb2, account_pb2, match_pb2, notify_pb2, notify_pb2_grpc  # noqa: E402
from kindred.common.v1 import common_pb2  # noqa: E402

COLLAPSE_MS = 1500
DIGEST_MS = 15000  # the four likes and the block below reach notify within it, even on a loaded machine
SETTLE = 30  # seconds: chat's event reaching notify, the collapse window, the sender's poll and a push


@pytest.fixture(scope="module")
def cluster(peers):  # noqa: F811
    running = Cluster(
        KINDRED_NOTIFY_SEND_POLL_MS="100", KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS=str(COLLAPSE_MS),
        KINDRED_CHAT_EVENT_POLL_MS="200", KINDRED_NOTIFY_LIKES_DIGEST_MS=str(DIGEST_MS),
        KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET, **push_peer_settings(peers))
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def stub(channel):
    return notify_pb2_grpc.NotificationServiceStub(channel)


def message_pushes(peer, token, kind="new_message"):
    return [entry for entry in pushes_to(peer, token) if kind_of(entry) == kind]


def kind_of(entry):
    if "payload" in entry:  # APNs
        return entry["payload"].get("kind")
    return entry.get("message", {}).get("data", {}).get("kind")  # FCM


def rows(cluster, user_id):
    """(state, item_count) of every message notification to the member, oldest first."""
    text = cluster.psql(f"SELECT state || ':' || item_count FROM notify.notifications WHERE user_id = '{user_id}' "
                        "AND kind = 'new_message' ORDER BY created_at").strip()
    return [line.strip() for line in text.splitlines() if line.strip()]


def pair(cluster, api, stub, peers):  # noqa: F811
    """Ann with an iPhone in French, Bob with an Android phone in English, connected, their match pushes done."""
    _, apns, fcm = peers
    ann = FitnessMember(cluster, api, "Ann", 48.8566, 2.3522)
    bob = FitnessMember(cluster, api, "Bob", 48.8600, 2.3400)
    ann_token, bob_token = apns_token(), f"fcm-{bob.id}"
    register(stub, ann.auth, platform=APNS, token=ann_token, locale="fr-FR", time_zone="Europe/Paris")
    register(stub, bob.auth, platform=FCM, token=bob_token, locale="en-GB", time_zone="Europe/London")
    thread = follow(api, ann, bob).match.match_id
    assert thread
    eventually(lambda: pushes_to(apns, ann_token) and pushes_to(fcm, bob_token), "the connection's pushes", SETTLE)
    return ann, bob, ann_token, bob_token, thread


def test_a_message_to_a_closed_app_is_exactly_one_push_naming_the_sender(cluster, api, stub, peers):  # noqa: F811
    _, apns, fcm = peers
    ann, bob, ann_token, bob_token, thread = pair(cluster, api, stub, peers)
    sent_at = time.time()
    send(api, ann, thread, "meet at the track at 7?")
    eventually(lambda: rows(cluster, bob.id) == ["sent:1"], "Bob's message notification sent", SETTLE)
    time.sleep(1.5)  # anything sent twice would show by now (the sender polls every 100 ms)
    [push] = message_pushes(fcm, bob_token)
    # Held for the collapse window (more messages of the thread would have joined it), then pushed.
    delay = push["time"] - sent_at
    assert delay >= COLLAPSE_MS / 1000, delay
    print(f"\nmessage sent -> push at the FCM peer: {delay * 1000:.0f} ms (collapse window {COLLAPSE_MS} ms)")
    message = push["message"]
    assert push["accepted"]
    assert message["notification"] == {"title": "Ann", "body": "New message from Ann"}
    assert "track" not in str(message)  # message text is off until Bob turns it on
    assert message["android"]["collapse_key"] == thread.replace("-", "")
    assert message["android"]["notification"]["notification_count"] == 1  # Bob's unread total
    assert message["data"]["thread_id"] == thread and message["data"]["user_id"] == ann.id
    assert ann.email not in str(message) and "48.8" not in str(message)
    # The other way, in French, to Ann's iPhone: apns-collapse-id is the thread, the badge her unread total.
    send(api, bob, thread, "yes!")
    send(api, bob, thread, "see you")
    eventually(lambda: message_pushes(apns, ann_token), "Ann's push", SETTLE)
    time.sleep(1.5)
    [to_ann] = message_pushes(apns, ann_token)
    assert to_ann["headers"]["apns-collapse-id"] == thread.replace("-", "")
    assert to_ann["payload"]["aps"]["alert"] == {"title": "Bob", "body": "Nouveau message de Bob"}
    assert to_ann["payload"]["aps"]["badge"] == 2


def test_a_recipient_with_the_app_open_gets_no_push(cluster, api, stub, peers, channel):  # noqa: F811
    _, _, fcm = peers
    ann, bob, _, bob_token, thread = pair(cluster, api, stub, peers)
    stream = Subscription(channel, bob)
    try:
        time.sleep(0.5)  # the stream is registered before its first read of the log
        send(api, ann, thread, "are you there?")
        assert stream.next("message").message.body == "are you there?"
        eventually(lambda: rows(cluster, bob.id) == ["suppressed:1"], "the push suppressed", SETTLE)
        assert message_pushes(fcm, bob_token) == []
    finally:
        stream.cancel()
    # The app closed: the next message is pushed.
    time.sleep(0.5)
    send(api, ann, thread, "gone?")
    eventually(lambda: rows(cluster, bob.id) == ["suppressed:1", "sent:1"], "the next one pushed", SETTLE)
    assert len(message_pushes(fcm, bob_token)) == 1


def test_three_quick_messages_are_one_collapsed_notification(cluster, api, stub, peers):  # noqa: F811
    _, _, fcm = peers
    ann, bob, _, bob_token, thread = pair(cluster, api, stub, peers)
    for body in ("one", "two", "three"):
        send(api, ann, thread, body)
    eventually(lambda: rows(cluster, bob.id) == ["sent:3"], "one notification for three messages", SETTLE)
    time.sleep(1.5)
    [push] = message_pushes(fcm, bob_token)
    assert push["message"]["android"]["notification"]["notification_count"] == 3


def test_message_text_shows_only_when_the_recipient_allows_it(cluster, api, stub, peers):  # noqa: F811
    _, _, fcm = peers
    ann, bob, _, bob_token, thread = pair(cluster, api, stub, peers)
    settings = stub.GetNotificationSettings(notify_pb2.GetNotificationSettingsRequest(), metadata=bob.auth,
                                            timeout=TIMEOUT)
    settings.show_message_text = True
    stub.UpdateNotificationSettings(notify_pb2.UpdateNotificationSettingsRequest(settings=settings),
                                    metadata=bob.auth, timeout=TIMEOUT)
    send(api, ann, thread, "first")
    send(api, ann, thread, "the latest one")
    eventually(lambda: message_pushes(fcm, bob_token), "Bob's push", SETTLE)
    [push] = message_pushes(fcm, bob_token)
    assert push["message"]["notification"] == {"title": "Ann", "body": "the latest one"}


def test_a_block_cancels_the_waiting_message_and_nothing_is_pushed(cluster, api, stub, peers):  # noqa: F811
    _, _, fcm = peers
    ann, bob, _, bob_token, thread = pair(cluster, api, stub, peers)
    # Bob's quiet hours (UTC, the two hours around now) hold the message, so the block surely finds it waiting.
    now = time.gmtime()
    minute = now.tm_hour * 60 + now.tm_min
    settings = stub.GetNotificationSettings(notify_pb2.GetNotificationSettingsRequest(), metadata=bob.auth,
                                            timeout=TIMEOUT)
    settings.time_zone = "UTC"
    settings.quiet_hours.enabled = True
    settings.quiet_hours.start_minute = (minute - 60) % 1440
    settings.quiet_hours.end_minute = (minute + 60) % 1440
    stub.UpdateNotificationSettings(notify_pb2.UpdateNotificationSettingsRequest(settings=settings),
                                    metadata=bob.auth, timeout=TIMEOUT)
    send(api, ann, thread, "hello?")
    eventually(lambda: rows(cluster, bob.id) == ["pending:1"], "the message waiting", SETTLE)
    time.sleep(COLLAPSE_MS / 1000 + 0.5)  # past its window: held by the quiet hours now
    assert rows(cluster, bob.id) == ["pending:1"]
    api.matches.Block(match_pb2.BlockRequest(target_user_id=ann.id), metadata=bob.auth, timeout=TIMEOUT)
    assert rows(cluster, bob.id) == ["cancelled:1"]  # Block answered: nothing about Ann is pending any more
    time.sleep(1)
    assert message_pushes(fcm, bob_token) == []


@pytest.fixture(scope="module")
def profiles(cluster):
    return ProfileProjection(cluster)


def test_likes_are_one_digest_naming_nobody_at_most_once_per_interval(cluster, api, stub, peers, profiles):  # noqa: F811
    _, _, fcm = peers
    dating = community(profiles)
    ann = new_user(cluster, api, profiles, dating)
    likers = [new_user(cluster, api, profiles, dating) for _ in range(4)]
    token = f"fcm-{ann.id}"
    register(stub, ann.auth, platform=FCM, token=token, locale="en-GB", time_zone="Europe/London")
    for liker in likers:
        swipe(api, liker, ann)
    # Ann blocks the last liker before the digest is due: that like is not told.
    api.matches.Block(match_pb2.BlockRequest(target_user_id=likers[3].id), metadata=ann.auth, timeout=TIMEOUT)
    eventually(lambda: message_pushes(fcm, token, "likes"), "the digest", SETTLE + DIGEST_MS / 1000)
    [digest] = message_pushes(fcm, token, "likes")
    message = digest["message"]
    assert message["notification"] == {"title": "New likes", "body": "3 people liked you"}
    assert "user_id" not in message["data"] and not any(liker.id in str(message) for liker in likers)
    # A fifth like right after the digest: the next digest waits for the interval after the first.
    fifth = new_user(cluster, api, profiles, dating)
    swipe(api, fifth, ann)
    eventually(lambda: len(message_pushes(fcm, token, "likes")) == 2, "the second digest",
               SETTLE + DIGEST_MS / 1000)
    second = message_pushes(fcm, token, "likes")[1]["message"]
    assert second["notification"]["body"] == "1 person liked you"
    finished = cluster.psql(
        f"SELECT extract(epoch FROM max(finished_at) - min(finished_at)) FROM notify.notifications "
        f"WHERE user_id = '{ann.id}' AND kind = 'likes' AND state = 'sent'").strip()
    assert float(finished) >= DIGEST_MS / 1000, finished
    assert cluster.psql(f"SELECT count(*) FROM notify.digest_likes WHERE user_id = '{ann.id}'").strip() == "0"


def test_a_resolved_report_tells_the_reporter_only_that_it_was_reviewed(cluster, api, stub, peers, profiles):  # noqa: F811
    _, _, fcm = peers
    dating = community(profiles)
    reporter, reported = new_user(cluster, api, profiles, dating), new_user(cluster, api, profiles, dating)
    moderator = new_user(cluster, api, profiles, dating)
    token = f"fcm-{reporter.id}"
    register(stub, reporter.auth, platform=FCM, token=token, locale="en-GB", time_zone="Europe/London")
    api.admin.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET, community_id=dating,
                                                             login=moderator.email), timeout=TIMEOUT)
    admin = api.accounts.SignIn(account_pb2.SignInRequest(community_id=dating, login=moderator.email,
                                                          password=PASSWORD), timeout=TIMEOUT).tokens.access_token
    report = api.matches.ReportUser(match_pb2.ReportUserRequest(
        target_user_id=reported.id, reason=common_pb2.REPORT_REASON_HARASSMENT, details="threats",
        idempotency_key="r1"), metadata=reporter.auth, timeout=TIMEOUT)
    for _ in range(2):  # resolved twice (a retry): one notification
        api.admin.ResolveReport(admin_pb2.ResolveReportRequest(
            report_id=report.report_id, resolution=admin_pb2.REPORT_RESOLUTION_WARNING_SENT, note="first warning"),
            metadata=bearer(admin), timeout=TIMEOUT)
    eventually(lambda: message_pushes(fcm, token, "report_outcome"), "the outcome", SETTLE)
    time.sleep(1.5)
    [push] = message_pushes(fcm, token, "report_outcome")
    message = push["message"]
    assert message["notification"] == {"title": "Your report",
                                       "body": "We reviewed your report. Thank you for telling us."}
    assert reported.id not in str(message) and "warn" not in str(message).lower() and "user_id" not in message["data"]
