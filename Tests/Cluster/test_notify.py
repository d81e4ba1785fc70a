"""The notify service in a running cluster (services/run-cluster.sh), driven as apps would, with Python grpcio
through the gateway's public NotificationService: devices registered idempotently per token, a token that moves
to the account that registers it last, bad input refused with nothing stored, sign-out removing the devices of that
session and sign-out everywhere removing all (from auth's session-end feed), settings, the `kindred devices` /
`kindred notifications` commands, and the queue match's events feed (one notification for each side of a new
connection, cancelled by a block)."""

import os
import subprocess
import time

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop, bin_dir
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_verify, unique

from test_consent import Api as FitnessApi, Member as FitnessMember, follow

from kindred.api.v1 import account_pb2, account_pb2_grpc, match_pb2, notify_pb2, notify_pb2_grpc  # noqa: E402

FCM, APNS, WEB_PUSH = notify_pb2.PUSH_PLATFORM_FCM, notify_pb2.PUSH_PLATFORM_APNS, notify_pb2.PUSH_PLATFORM_WEB_PUSH
SETTLE = 15  # seconds: the bound for a session end to reach notify and its sweep


@pytest.fixture(scope="module")
def cluster():
    # No push provider (no local peers either): notifications stay queued, so the tests can read the queue.
    running = Cluster(KINDRED_NOTIFY_SESSION_SWEEP_MS="200", args=("--no-push-peers",))
    assert "notify" in running.servers()
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


@pytest.fixture(scope="module")
def accounts(channel):
    return account_pb2_grpc.AccountServiceStub(channel)


@pytest.fixture(scope="module")
def notifications(channel):
    return notify_pb2_grpc.NotificationServiceStub(channel)


class Member:
    def __init__(self, cluster, accounts):
        self.community, self.email, self.username = unique("nt-"), f"{unique('nt-')}@example.com", unique("nt_")
        sign_up_and_verify(cluster, accounts, self.community, self.email, self.username)
        self.session = self.sign_in(accounts)
        self.id = self.session.account.user_id

    def sign_in(self, accounts):
        """A new session of this member."""
        return accounts.SignIn(account_pb2.SignInRequest(community_id=self.community, login=self.email,
                                                         password=PASSWORD), timeout=TIMEOUT)

    @property
    def auth(self):
        return bearer(self.session.tokens.access_token)


def register(notifications, auth, platform=FCM, token="", **fields):
    return notifications.RegisterDevice(notify_pb2.RegisterDeviceRequest(platform=platform, token=token,
                                                                         app_id="dev.kindred.test", **fields),
                                        metadata=auth, timeout=TIMEOUT)


def devices(notifications, auth):
    return list(notifications.ListDevices(notify_pb2.ListDevicesRequest(), metadata=auth, timeout=TIMEOUT).devices)


def device_rows(cluster, user_id):
    return int(cluster.psql(f"SELECT count(*) FROM notify.devices WHERE user_id = '{user_id}'"))


def code_of(call):
    try:
        call()
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def eventually(condition, what, timeout=SETTLE):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def test_devices_are_registered_once_per_token(cluster, accounts, notifications):
    ann = Member(cluster, accounts)
    first = register(notifications, ann.auth, token=f"fcm-{ann.id}", locale="fr-FR", time_zone="Europe/Paris")
    again = register(notifications, ann.auth, token=f"fcm-{ann.id}", locale="fr-FR", time_zone="Europe/Paris")
    assert first.created and not again.created
    assert first.device.device_id == again.device.device_id
    apns = register(notifications, ann.auth, platform=APNS, token="ab" * 32)
    listed = devices(notifications, ann.auth)
    assert [d.device_id for d in listed] == [apns.device.device_id, first.device.device_id]
    assert listed[1].token_hint == ann.id[-6:] and listed[1].locale == "fr-FR"
    assert device_rows(cluster, ann.id) == 2


def test_bad_devices_and_settings_are_refused_and_change_nothing(cluster, accounts, notifications):
    bob = Member(cluster, accounts)
    subscription = notify_pb2.WebPushSubscription(
        endpoint="http://127.0.0.1:1/internal",
        p256dh="BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
        auth="tBHItJI5svbpez7KI4CCXg")
    for call in (
        lambda: register(notifications, bob.auth, platform=WEB_PUSH, web_push=subscription),  # host not allowed
        lambda: register(notifications, bob.auth, platform=APNS, token="not-hex"),
        lambda: register(notifications, bob.auth, platform=notify_pb2.PUSH_PLATFORM_UNSPECIFIED, token="x"),
        lambda: register(notifications, bob.auth, token="fcm-ok", time_zone="Mars/Olympus"),
        lambda: notifications.UpdateNotificationSettings(notify_pb2.UpdateNotificationSettingsRequest(
            settings=notify_pb2.NotificationSettings(quiet_hours=notify_pb2.QuietHours(start_minute=1440))),
            metadata=bob.auth, timeout=TIMEOUT),
    ):
        assert code_of(call) == grpc.StatusCode.INVALID_ARGUMENT
    assert devices(notifications, bob.auth) == []
    assert cluster.psql(f"SELECT count(*) FROM notify.settings WHERE user_id = '{bob.id}'") == "0"
    assert code_of(lambda: devices(notifications, [])) == grpc.StatusCode.UNAUTHENTICATED


def test_a_token_belongs_to_the_account_that_registered_it_last(cluster, accounts, notifications):
    cat, dan = Member(cluster, accounts), Member(cluster, accounts)
    token = f"shared-{cat.id}"
    old = register(notifications, cat.auth, token=token).device
    moved = register(notifications, dan.auth, token=token)
    assert moved.created and moved.device.device_id != old.device_id
    assert devices(notifications, cat.auth) == []
    assert [d.device_id for d in devices(notifications, dan.auth)] == [moved.device.device_id]
    removed = notifications.UnregisterDevice(notify_pb2.UnregisterDeviceRequest(device_id=moved.device.device_id),
                                             metadata=cat.auth, timeout=TIMEOUT)
    assert not removed.removed, "another member's device is not the caller's to remove"
    removed = notifications.UnregisterDevice(notify_pb2.UnregisterDeviceRequest(platform=FCM, token=token),
                                             metadata=dan.auth, timeout=TIMEOUT)
    assert removed.removed and devices(notifications, dan.auth) == []


def test_sign_out_removes_that_sessions_devices_and_sign_out_everywhere_all(cluster, accounts, notifications):
    eve = Member(cluster, accounts)
    phone, tablet = eve.session, eve.sign_in(accounts)
    register(notifications, bearer(phone.tokens.access_token), token=f"phone-{eve.id}")
    kept = register(notifications, bearer(tablet.tokens.access_token), token=f"tablet-{eve.id}").device
    accounts.SignOut(account_pb2.SignOutRequest(), metadata=bearer(phone.tokens.access_token), timeout=TIMEOUT)
    eventually(lambda: device_rows(cluster, eve.id) == 1, "the phone's device removed after its sign-out")
    assert [d.device_id for d in devices(notifications, bearer(tablet.tokens.access_token))] == [kept.device_id]
    laptop = eve.sign_in(accounts)
    register(notifications, bearer(laptop.tokens.access_token), token=f"laptop-{eve.id}")
    assert device_rows(cluster, eve.id) == 2
    accounts.SignOutEverywhere(account_pb2.SignOutEverywhereRequest(), metadata=bearer(laptop.tokens.access_token),
                               timeout=TIMEOUT)
    eventually(lambda: device_rows(cluster, eve.id) == 0, "every device removed after sign-out everywhere")


def test_settings_default_and_replace(cluster, accounts, notifications):
    fox = Member(cluster, accounts)
    defaults = notifications.GetNotificationSettings(notify_pb2.GetNotificationSettingsRequest(), metadata=fox.auth,
                                                     timeout=TIMEOUT)
    assert defaults.new_match and defaults.new_message and defaults.likes_received and defaults.report_outcome
    assert not defaults.show_message_text, "message text stays off the lock screen until the member allows it"
    wanted = notify_pb2.NotificationSettings(new_match=True, likes_received=True, time_zone="Asia/Tokyo",
                                             quiet_hours=notify_pb2.QuietHours(enabled=True, start_minute=1380,
                                                                               end_minute=360))
    saved = notifications.UpdateNotificationSettings(notify_pb2.UpdateNotificationSettingsRequest(settings=wanted),
                                                     metadata=fox.auth, timeout=TIMEOUT)
    assert saved == wanted
    assert notifications.GetNotificationSettings(notify_pb2.GetNotificationSettingsRequest(), metadata=fox.auth,
                                                 timeout=TIMEOUT) == wanted


def test_the_cli_lists_devices_and_changes_settings(cluster, accounts, tmp_path):
    gus = Member(cluster, accounts)
    env = dict(os.environ, KINDRED_GATEWAY=cluster.gateway, KINDRED_COMMUNITY=gus.community,
               KINDRED_CONFIG_DIR=str(tmp_path))

    def kindred(*args, stdin=""):
        done = subprocess.run([str(bin_dir() / "kindred"), *args], env=env, input=stdin, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    kindred("signin", gus.email, stdin=PASSWORD + "\n")
    assert "no devices" in kindred("devices")
    assert "Registered device" in kindred("devices", "add", "fcm", "--token", f"cli-{gus.id}",
                                          "--time-zone", "Europe/Berlin")
    listed = kindred("devices")
    assert "fcm" in listed and gus.id[-6:] in listed and "Europe/Berlin" in listed
    shown = kindred("notifications", "set", "--messages", "off", "--quiet-hours", "22:30-07:00")
    assert "new messages    off" in shown and "quiet hours     22:30-07:00" in shown
    assert "new messages    off" in kindred("notifications")


def queued(cluster, user_id, state):
    return int(cluster.psql(f"SELECT count(*) FROM notify.notifications WHERE user_id = '{user_id}' "
                            f"AND kind = 'new_match' AND state = '{state}'"))


def test_a_connection_queues_one_notification_for_each_side_and_a_block_cancels_them(cluster, channel):
    """Two fitness members (one-way follows) connect through the gateway: match's MatchCreated reaches notify,
    which queues exactly one new-match notification for each of them; a block cancels both while pending."""
    api = FitnessApi(channel)
    ann = FitnessMember(cluster, api, "Ann", 48.8566, 2.3522)
    bob = FitnessMember(cluster, api, "Bob", 48.8600, 2.3400)
    connected = follow(api, ann, bob)
    assert connected.match.match_id
    eventually(lambda: queued(cluster, ann.id, "pending") == 1 and queued(cluster, bob.id, "pending") == 1,
               "one pending notification for each side")
    follow(api, bob, ann)  # following back changes nothing in the queue
    time.sleep(1)
    assert queued(cluster, ann.id, "pending") == 1 and queued(cluster, bob.id, "pending") == 1
    api.matches.Block(match_pb2.BlockRequest(target_user_id=ann.id), metadata=bob.auth, timeout=TIMEOUT)
    # Block answers once every consumer, notify included, applied it: cancelled at once.
    assert queued(cluster, ann.id, "cancelled") == 1 and queued(cluster, bob.id, "cancelled") == 1
    assert queued(cluster, ann.id, "pending") == 0 and queued(cluster, bob.id, "pending") == 0
