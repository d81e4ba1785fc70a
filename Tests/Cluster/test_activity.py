"""Activity broadcasts ("working out now") in the fitness community, through the gateway, against the independent
APNs and FCM peers of Tests/Peers (Python `h2` and `cryptography`): a member starts one with ActivityService/
StartActivity, match writes ActivityStarted (follower ids only) through its outbox, notify queues one notification
per follower and pushes "Ann is working out now: running" to their closed apps. A second start within the notify
interval pushes nothing; a follower the broadcaster blocked, a follower who turned "activities" off and a member who
does not follow get nothing; followers see the broadcast in GetHome (with the broadcaster's card) until it stops."""

import time
import uuid
from types import SimpleNamespace

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_verify, unique
from test_consent import Member as FitnessMember, api, channel, follow  # noqa: F401 (fixtures)
from test_match import BOOTSTRAP_SECRET
from test_notify import APNS, FCM, WEB_PUSH, eventually, register
from test_notify_push import apns_token, peers, push_peer_settings, pushes_to, subscribe, webpush  # noqa: F401 (fixtures)

from kindred.common.v1 import common_pb2  # noqa: E402
from kindred.api.v1 import account_pb2, activity_pb2, activity_pb2_grpc, deck_pb2  # noqa: E402
from kindred.api.v1 import home_pb2, home_pb2_grpc, match_pb2, notify_pb2  # noqa: E402

SETTLE = 30  # seconds: match's event reaching notify, the sender's poll and a push
DURATION_MS = 60000  # the shortest broadcast a deployment may set: the quiet-hours test waits for its end


@pytest.fixture(scope="module")
def cluster(peers, webpush):  # noqa: F811
    folder = peers[0]
    running = Cluster(
        KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE=str(folder / "vapid-key.pem"),
        KINDRED_NOTIFY_WEB_PUSH_SUBJECT="mailto:push@kindred.test",
        KINDRED_NOTIFY_WEB_PUSH_CA_FILE=str(folder / "ca.pem"), KINDRED_NOTIFY_WEB_PUSH_HOSTS="localhost",
        KINDRED_NOTIFY_SEND_POLL_MS="100", KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET,
        KINDRED_MATCH_ACTIVITY_DURATION_MS=str(DURATION_MS), **push_peer_settings(peers))
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


def activity_pushes(peer, token):
    """The activity pushes a peer recorded for one APNs or FCM token or one Web Push subscription id."""
    def kind(entry):
        if "payload" in entry:  # APNs, Web Push (decrypted)
            return entry["payload"].get("kind", entry["payload"].get("data", {}).get("kind"))
        return entry.get("message", {}).get("data", {}).get("kind")  # FCM
    recorded = [entry for entry in peer.entries() if entry.get("subscription") == token] or pushes_to(peer, token)
    return [entry for entry in recorded if kind(entry) == "activity"]


def start(channel, member, activity="", key=None):
    return activity_pb2_grpc.ActivityServiceStub(channel).StartActivity(
        activity_pb2.StartActivityRequest(activity=activity, idempotency_key=key or str(uuid.uuid4())),
        metadata=member.auth, timeout=TIMEOUT)


def home_activities(channel, member):
    home = home_pb2_grpc.HomeServiceStub(channel).GetHome(home_pb2.GetHomeRequest(), metadata=member.auth,
                                                          timeout=TIMEOUT)
    assert "activities" not in home.unavailable_parts, home.unavailable_parts
    return list(home.followed_activities)


def test_followers_with_the_app_closed_get_one_push_and_see_it_in_home(cluster, api, channel, peers,  # noqa: F811
                                                                       webpush):  # noqa: F811
    folder, apns, fcm = peers
    ann = FitnessMember(cluster, api, "Ann", 48.8566, 2.3522)
    bob = FitnessMember(cluster, api, "Bob", 48.8600, 2.3400)  # follows Ann: one push
    cat = FitnessMember(cluster, api, "Cat", 48.8610, 2.3450)  # follows Ann, then Ann blocks Cat: none
    dee = FitnessMember(cluster, api, "Dee", 48.8620, 2.3460)  # follows Ann, activities off: none
    eve = FitnessMember(cluster, api, "Eve", 48.8630, 2.3470)  # Ann follows Eve (Eve does not follow Ann): none
    fay = FitnessMember(cluster, api, "Fay", 48.8640, 2.3480)  # follows Ann on an iPhone in French: one push
    gus = FitnessMember(cluster, api, "Gus", 48.8650, 2.3490)  # follows Ann in a browser: one Web Push
    tokens = {}
    for member, platform, token, locale in ((bob, FCM, f"fcm-{bob.id}", "en-GB"), (cat, APNS, apns_token(), "en-GB"),
                                            (dee, APNS, apns_token(), "en-GB"), (eve, FCM, f"fcm-{eve.id}", "fr-FR"),
                                            (fay, APNS, apns_token(), "fr-FR")):
        register(api.notifications, member.auth, platform=platform, token=token, locale=locale,
                 time_zone="Europe/Paris")
        tokens[member.id] = token
    subscription = subscribe(webpush.port, folder)
    register(api.notifications, gus.auth, platform=WEB_PUSH, locale="en-US", time_zone="Europe/Paris",
             web_push=notify_pb2.WebPushSubscription(endpoint=subscription["endpoint"], p256dh=subscription["p256dh"],
                                                     auth=subscription["auth"]))
    tokens[gus.id] = subscription["id"]
    for follower in (bob, cat, dee, fay, gus):
        assert follow(api, follower, ann).outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED
    follow(api, ann, eve)
    api.matches.Block(match_pb2.BlockRequest(target_user_id=cat.id), metadata=ann.auth, timeout=TIMEOUT)
    settings = api.notifications.GetNotificationSettings(notify_pb2.GetNotificationSettingsRequest(),
                                                         metadata=dee.auth, timeout=TIMEOUT)
    assert settings.activities  # on by default
    settings.activities = False
    api.notifications.UpdateNotificationSettings(notify_pb2.UpdateNotificationSettingsRequest(settings=settings),
                                                 metadata=dee.auth, timeout=TIMEOUT)

    key = str(uuid.uuid4())
    started = start(channel, ann, "running", key)
    assert started.followers_notified and not started.replayed
    assert started.broadcast.activity == "running" and started.broadcast.user_id == ann.id
    assert start(channel, ann, "running", key).replayed  # a retry: the same broadcast, nothing more sent
    for peer, member in ((fcm, bob), (apns, fay), (webpush, gus)):
        eventually(lambda: activity_pushes(peer, tokens[member.id]), f"the push to {member.id}", SETTLE)

    # A second start within the notify interval: accepted and shown, no push.
    second = start(channel, ann, "cycling")
    assert not second.followers_notified and second.next_notify_unix_ms > int(time.time() * 1000)
    time.sleep(3)  # anything more would have been sent by now (the sender polls every 100 ms)
    eventually(lambda: "pending" not in cluster.psql(
        f"SELECT string_agg(state, ',') FROM notify.notifications WHERE kind = 'activity' "
        f"AND subject_user_id = '{ann.id}'"), "every activity notification about Ann done", SETTLE)

    [push] = activity_pushes(fcm, tokens[bob.id])
    message = push["message"]
    assert push["accepted"]
    assert message["notification"] == {"title": "Working out now", "body": "Ann is working out now: running"}
    assert message["data"]["user_id"] == ann.id
    assert ann.email not in str(message) and "48.8" not in str(message)
    # The pushes expire when the broadcast ends: a phone that comes online after the workout is not told.
    # FCM's android.ttl and Web Push's TTL are whole seconds from when notify sent them, apns-expiration whole seconds.
    end = started.broadcast.expires_unix_ms
    assert end - 10000 <= push["expires_unix_ms"] <= end, (push["expires_unix_ms"], end)
    [french] = activity_pushes(apns, tokens[fay.id])
    assert french["accepted"] and french["expires_unix_ms"] == end // 1000 * 1000, (french["expires_unix_ms"], end)
    assert french["payload"]["aps"]["alert"] == {"title": "En pleine séance",
                                                 "body": "Ann s'entraîne en ce moment : course à pied"}
    [browser] = activity_pushes(webpush, tokens[gus.id])
    assert browser["accepted"] and end - 10000 <= browser["expires_unix_ms"] <= end, (browser["expires_unix_ms"], end)
    assert browser["payload"]["body"] == "Ann is working out now: running"
    assert activity_pushes(apns, tokens[cat.id]) == []
    assert activity_pushes(apns, tokens[dee.id]) == []
    assert activity_pushes(fcm, tokens[eve.id]) == []
    states = cluster.psql(f"SELECT count(*) FROM notify.notifications WHERE kind = 'activity' "
                          f"AND subject_user_id = '{ann.id}'").strip()
    assert states == "3", states  # Bob's, Fay's and Gus's: none queued for Cat, Dee or Eve

    # Home: Bob and Dee (followers) see the newest broadcast with Ann's card; Cat (blocked) and Eve do not.
    for follower in (bob, dee, fay):
        [shown] = home_activities(channel, follower)
        assert shown.broadcast_id == second.broadcast.broadcast_id and shown.activity == "cycling"
        assert shown.profile.display_name == "Ann"
    assert home_activities(channel, cat) == []
    assert home_activities(channel, eve) == []

    activity_pb2_grpc.ActivityServiceStub(channel).StopActivity(activity_pb2.StopActivityRequest(),
                                                                metadata=ann.auth, timeout=TIMEOUT)
    assert home_activities(channel, bob) == []


def test_refused_starts_say_why(cluster, api, channel):
    ann = FitnessMember(cluster, api, "Ann", 48.8566, 2.3522)
    with pytest.raises(grpc.RpcError) as refused:
        start(channel, ann, "chess")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    detail = common_pb2.ErrorDetail.FromString(dict(refused.value.trailing_metadata())["kindred-error-bin"])
    assert [(v.field, v.reason) for v in detail.field_violations] == [("activity", "NOT_IN_LIST")]
    # A dating member has nobody following them: the community is not a follow community.
    email = f"{unique('dt-')}@example.com"
    sign_up_and_verify(cluster, api.accounts, "dating", email, unique("dt_"))
    signed = api.accounts.SignIn(account_pb2.SignInRequest(community_id="dating", login=email, password=PASSWORD),
                                 timeout=TIMEOUT)
    dating = SimpleNamespace(auth=bearer(signed.tokens.access_token))
    with pytest.raises(grpc.RpcError) as refused:
        start(channel, dating)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    detail = common_pb2.ErrorDetail.FromString(dict(refused.value.trailing_metadata())["kindred-error-bin"])
    assert detail.reason == "NOT_A_FOLLOW_COMMUNITY"


def test_a_follower_in_quiet_hours_is_not_told_and_the_push_is_dropped_when_the_broadcast_ends(cluster, api, channel,
                                                                                                 peers):  # noqa: F811
    _, _, fcm = peers
    gil = FitnessMember(cluster, api, "Gil", 48.8566, 2.3522)
    hal = FitnessMember(cluster, api, "Hal", 48.8600, 2.3400)
    token = f"fcm-{hal.id}"
    register(api.notifications, hal.auth, platform=FCM, token=token, locale="en-GB", time_zone="Europe/Paris")
    settings = api.notifications.GetNotificationSettings(notify_pb2.GetNotificationSettingsRequest(),
                                                         metadata=hal.auth, timeout=TIMEOUT)
    now = time.gmtime()
    minute = now.tm_hour * 60 + now.tm_min
    settings.time_zone = "UTC"
    settings.quiet_hours.enabled = True
    settings.quiet_hours.start_minute, settings.quiet_hours.end_minute = (minute - 10) % 1440, (minute + 120) % 1440
    api.notifications.UpdateNotificationSettings(notify_pb2.UpdateNotificationSettingsRequest(settings=settings),
                                                 metadata=hal.auth, timeout=TIMEOUT)
    follow(api, hal, gil)
    started = start(channel, gil, "yoga")
    assert started.followers_notified

    def state():
        return cluster.psql(f"SELECT string_agg(state, ',') FROM notify.notifications WHERE kind = 'activity' "
                            f"AND user_id = '{hal.id}'").strip()
    eventually(lambda: state() == "pending", "Hal's notification held for quiet hours", SETTLE)
    assert [card.broadcast_id for card in home_activities(channel, hal)] == [started.broadcast.broadcast_id]
    wait = started.broadcast.expires_unix_ms / 1000 - time.time()
    time.sleep(max(0.0, wait))
    eventually(lambda: state() == "cancelled", "the notification dropped once the broadcast ended", SETTLE)
    assert activity_pushes(fcm, token) == []
    assert home_activities(channel, hal) == []  # expired
