"""Notify's sender in a running cluster, against the independent APNs, FCM and Web Push peers of Tests/Peers (Python
`h2`, `cryptography` and `http_ece`, sharing no code with Kindred) with throwaway keys and certificates made for this
run: members register an iOS or an Android device or a browser's push subscription, connect through the gateway, and each device gets exactly one push for the
new match, signed with the configured key (ES256 provider token, RS256 service-account grant), for the configured
topic, with nothing personal in it; a device its push service says is gone (APNs 410, FCM UNREGISTERED) is
removed; a push service asking to retry later gets the notification once after it said so."""

import json
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from cluster_harness import ROOT, Cluster, assert_clean_stop
from test_cluster import TIMEOUT
from test_consent import Api as FitnessApi, Member as FitnessMember, follow
from test_notify import APNS, FCM, WEB_PUSH, devices, eventually, register


PEERS = ROOT / "Tests" / "Peers"
KEY_ID, TEAM_ID, TOPIC = "KEY1234567", "TEAM123456", "dev.kindred.test"
CLIENT_EMAIL, PROJECT = "push@kindred-test.iam.gserviceaccount.com", "kindred-test"
SETTLE = 30  # seconds: match's event reaching notify, the sender's poll and a push


class Peer:
    """One peer process: its port, its record (JSON lines) and its rules file."""

    def __init__(self, script, folder, arguments):
        self.record = folder / f"{script}.jsonl"
        self.rules = folder / f"{script}-rules.json"
        self.rules.write_text("{}")
        self.process = subprocess.Popen(
            [sys.executable, str(PEERS / script), "--cert", str(folder / "server.pem"),
             "--key", str(folder / "server-key.pem"), "--record", str(self.record), "--rules", str(self.rules),
             "--exit-on-stdin-eof", *arguments],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline().strip()
        assert line.startswith("LISTENING "), f"{script} did not start: {line!r}"
        self.port = int(line.split()[1])

    def set_rules(self, rules):
        temporary = self.rules.with_suffix(".new")
        temporary.write_text(json.dumps(rules))
        temporary.rename(self.rules)

    def entries(self):
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def stop(self):
        self.process.stdin.close()
        self.process.kill()
        self.process.wait()


def unused_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("push-keys")
    fcm_port = unused_port()
    token_uri = f"https://127.0.0.1:{fcm_port}/token"
    subprocess.run([sys.executable, str(PEERS / "push_test_keys.py"), str(folder), "--token-uri", token_uri,
                    "--project", PROJECT], check=True, capture_output=True)
    apns = Peer("apns_peer.py", folder, ["--port", "0", "--public-key", str(folder / "apns-key.pub.pem"),
                                         "--key-id", KEY_ID, "--team-id", TEAM_ID, "--topic", TOPIC])
    fcm = Peer("fcm_peer.py", folder, ["--port", str(fcm_port), "--public-key",
                                       str(folder / "fcm-service-account.pub.pem"), "--client-email", CLIENT_EMAIL,
                                       "--token-uri", token_uri, "--project", PROJECT])
    yield folder, apns, fcm
    apns.stop()
    fcm.stop()


def push_peer_settings(peers, fcm=True):
    """The settings that point notify at the APNs peer of `peers` (and its FCM peer unless `fcm` is false), with
    the keys and CA that `push_test_keys.py` made for them."""
    folder, apns, fcm_peer = peers
    settings = dict(
        KINDRED_NOTIFY_APNS_BASE_URL=f"https://127.0.0.1:{apns.port}",
        KINDRED_NOTIFY_APNS_KEY_FILE=str(folder / "apns-key.p8"), KINDRED_NOTIFY_APNS_KEY_ID=KEY_ID,
        KINDRED_NOTIFY_APNS_TEAM_ID=TEAM_ID, KINDRED_NOTIFY_APNS_TOPIC=TOPIC,
        KINDRED_NOTIFY_APNS_CA_FILE=str(folder / "ca.pem"))
    if fcm:
        settings.update(
            KINDRED_NOTIFY_FCM_SERVICE_ACCOUNT_FILE=str(folder / "fcm-service-account.json"),
            KINDRED_NOTIFY_FCM_BASE_URL=f"https://127.0.0.1:{fcm_peer.port}",
            KINDRED_NOTIFY_FCM_CA_FILE=str(folder / "ca.pem"))
    return settings


@pytest.fixture(scope="module")
def webpush(peers):
    folder = peers[0]
    peer = Peer("webpush_peer.py", folder, ["--port", "0", "--vapid-public-key", str(folder / "vapid-key.pub.pem")])
    yield peer
    peer.stop()


@pytest.fixture(scope="module")
def cluster(peers, webpush):
    folder = peers[0]
    running = Cluster(
        KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE=str(folder / "vapid-key.pem"),
        KINDRED_NOTIFY_WEB_PUSH_SUBJECT="mailto:push@kindred.test",
        KINDRED_NOTIFY_WEB_PUSH_CA_FILE=str(folder / "ca.pem"), KINDRED_NOTIFY_WEB_PUSH_HOSTS="localhost",
        KINDRED_NOTIFY_SEND_POLL_MS="100", **push_peer_settings(peers))
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def api(cluster):
    import grpc
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield FitnessApi(channel)


def apns_token():
    import secrets
    return secrets.token_hex(32)


def pushes_to(peer, token):
    """The requests the peer recorded for one device (APNs: its token; FCM: its registration token)."""
    return [entry for entry in peer.entries()
            if entry.get("device") == token or entry.get("registration_token") == token]


def state_of(cluster, user_id):
    return cluster.psql(f"SELECT string_agg(state, ',') FROM notify.notifications WHERE user_id = '{user_id}' "
                        "AND kind = 'new_match'").strip()


def pair(cluster, api, stub, apns_rule=None, fcm_rule=None, peers=None):
    """Ann with an iPhone, Bob with an Android phone, connected through the gateway."""
    ann = FitnessMember(cluster, api, "Ann", 48.8566, 2.3522)
    bob = FitnessMember(cluster, api, "Bob", 48.8600, 2.3400)
    ann_token, bob_token = apns_token(), f"fcm-{bob.id}"
    register(stub, ann.auth, platform=APNS, token=ann_token, locale="fr-FR", time_zone="Europe/Paris")
    register(stub, bob.auth, platform=FCM, token=bob_token, locale="en-GB", time_zone="Europe/London")
    if peers is not None:
        _, apns, fcm = peers
        apns.set_rules({ann_token: apns_rule} if apns_rule else {})
        fcm.set_rules({bob_token: fcm_rule} if fcm_rule else {})
    assert follow(api, ann, bob).match.match_id
    return ann, bob, ann_token, bob_token


@pytest.fixture(scope="module")
def stub(cluster):
    import grpc
    from kindred.api.v1 import notify_pb2_grpc
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield notify_pb2_grpc.NotificationServiceStub(channel)


def test_a_match_reaches_each_sides_device_once_signed_and_without_personal_data(cluster, api, stub, peers):
    _, apns, fcm = peers
    ann, bob, ann_token, bob_token = pair(cluster, api, stub)
    eventually(lambda: pushes_to(apns, ann_token) and pushes_to(fcm, bob_token), "a push to each side", SETTLE)
    eventually(lambda: state_of(cluster, ann.id) == "sent" and state_of(cluster, bob.id) == "sent",
               "both notifications sent", SETTLE)
    time.sleep(2)  # anything sent twice would show by now (the sender polls every 100 ms)
    [to_ann], [to_bob] = pushes_to(apns, ann_token), pushes_to(fcm, bob_token)
    # APNs: accepted by the peer, which verified the ES256 provider token against the .p8 key's public key.
    assert to_ann["accepted"] and to_ann["jwt"]["header"]["kid"] == KEY_ID
    assert to_ann["jwt"]["claims"]["iss"] == TEAM_ID and to_ann["headers"]["apns-topic"] == TOPIC
    notification_id = cluster.psql(f"SELECT notification_id FROM notify.notifications WHERE user_id = '{ann.id}'")
    assert to_ann["headers"]["apns-id"] == notification_id.strip()
    assert to_ann["payload"]["aps"]["alert"]["title"] == "Nouvelle connexion"  # Ann's device is in French (fitness: a connection)
    # FCM: sent with an access token the peer issued for the RS256-signed service-account grant.
    assert to_bob["accepted"] and to_bob["message"]["token"] == bob_token
    assert any(entry.get("kind") == "token" and entry["accepted"] for entry in fcm.entries())
    for text in (json.dumps(to_ann["payload"]), json.dumps(to_bob["message"])):
        assert ann.email not in text and bob.email not in text and "48.8" not in text and "2.3" not in text


def test_a_device_its_push_service_calls_gone_is_removed(cluster, api, stub, peers):
    _, apns, fcm = peers
    ann, bob, ann_token, bob_token = pair(
        cluster, api, stub, apns_rule={"status": 410, "reason": "Unregistered"},
        fcm_rule={"status": 404, "error_code": "UNREGISTERED"}, peers=peers)
    eventually(lambda: not devices(stub, ann.auth) and not devices(stub, bob.auth), "both devices removed", SETTLE)
    assert len(pushes_to(apns, ann_token)) == 1 and len(pushes_to(fcm, bob_token)) == 1
    eventually(lambda: state_of(cluster, ann.id) == "skipped" and state_of(cluster, bob.id) == "skipped",
               "nothing left to reach", SETTLE)


def test_a_push_service_asking_to_retry_later_gets_the_notification_once_afterwards(cluster, api, stub, peers):
    _, apns, fcm = peers
    ann, bob, ann_token, bob_token = pair(
        cluster, api, stub, apns_rule={"status": 429, "reason": "TooManyRequests", "retry_after": 1, "times": 1},
        fcm_rule={"status": 503, "retry_after": 1, "times": 1}, peers=peers)
    eventually(lambda: state_of(cluster, ann.id) == "sent" and state_of(cluster, bob.id) == "sent",
               "both sent after the retry", SETTLE)
    time.sleep(2)
    for peer, token in ((apns, ann_token), (fcm, bob_token)):
        answers = [entry["status"] for entry in pushes_to(peer, token)]
        assert answers == [answers[0], 200] and answers[0] in (429, 503), answers
    assert devices(stub, ann.auth) and devices(stub, bob.auth)


def subscribe(port, folder):
    """A browser's push subscription made at the Web Push peer (what pushManager.subscribe() returns)."""
    import ssl
    import httpx
    trust = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    with httpx.Client(http2=True, verify=trust, timeout=TIMEOUT) as client:
        answer = client.post(f"https://localhost:{port}/subscribe")
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_a_browser_subscription_gets_one_push_the_peer_decrypts(cluster, api, stub, peers, webpush):
    from kindred.api.v1 import notify_pb2
    folder = peers[0]
    ann = FitnessMember(cluster, api, "Ann", 48.8566, 2.3522)
    bob = FitnessMember(cluster, api, "Bob", 48.8600, 2.3400)
    subscription = subscribe(webpush.port, folder)
    register(stub, ann.auth, platform=WEB_PUSH, locale="fr-FR", time_zone="Europe/Paris",
             web_push=notify_pb2.WebPushSubscription(endpoint=subscription["endpoint"], p256dh=subscription["p256dh"],
                                                     auth=subscription["auth"]))
    # The browser subscribes with the deployment's VAPID public key, which the settings carry.
    settings = stub.GetNotificationSettings(notify_pb2.GetNotificationSettingsRequest(), metadata=ann.auth,
                                            timeout=TIMEOUT)
    from cryptography.hazmat.primitives import serialization
    public = serialization.load_pem_public_key((folder / "vapid-key.pub.pem").read_bytes()).public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    import base64
    assert settings.web_push_application_server_key == base64.urlsafe_b64encode(public).rstrip(b"=").decode()
    assert follow(api, ann, bob).match.match_id

    def to_ann():
        return [entry for entry in webpush.entries() if entry.get("subscription") == subscription["id"]]

    eventually(lambda: to_ann() and state_of(cluster, ann.id) == "sent", "a push to Ann's browser", SETTLE)
    time.sleep(2)  # anything sent twice would show by now
    [push] = to_ann()
    # Accepted: VAPID verified by the peer (signature under the VAPID key, aud, exp, sub), the body decrypted with
    # the subscription's private key and auth secret by http_ece.
    assert push["accepted"] and push["vapid"]["aud"] == f"https://localhost:{webpush.port}"
    assert push["vapid"]["sub"] == "mailto:push@kindred.test"
    notification_id = cluster.psql(f"SELECT notification_id FROM notify.notifications WHERE user_id = '{ann.id}'")
    assert push["payload"]["id"] == notification_id.strip()
    assert push["payload"]["title"] == "Nouvelle connexion"
    assert push["payload"]["data"] == {"kind": "new_match", "user_id": bob.id}
    assert push["headers"]["content-encoding"] == "aes128gcm" and int(push["headers"]["ttl"]) > 0
    text = json.dumps(push["payload"])
    assert ann.email not in text and bob.email not in text and "48.8" not in text


def test_a_subscription_its_push_service_calls_gone_is_removed(cluster, api, stub, peers, webpush):
    from kindred.api.v1 import notify_pb2
    ann = FitnessMember(cluster, api, "Ann", 48.8566, 2.3522)
    bob = FitnessMember(cluster, api, "Bob", 48.8600, 2.3400)
    subscription = subscribe(webpush.port, peers[0])
    webpush.set_rules({subscription["id"]: {"status": 410}})
    register(stub, ann.auth, platform=WEB_PUSH,
             web_push=notify_pb2.WebPushSubscription(endpoint=subscription["endpoint"], p256dh=subscription["p256dh"],
                                                     auth=subscription["auth"]))
    assert follow(api, ann, bob).match.match_id
    eventually(lambda: not devices(stub, ann.auth), "the subscription removed", SETTLE)
    assert [entry["status"] for entry in webpush.entries() if entry.get("subscription") == subscription["id"]] == [410]


def test_run_cluster_starts_its_push_peers_and_each_platform_lands_there():
    """`run-cluster.sh` (development) starts the local APNs, FCM and Web Push peers with throwaway keys and points
    notify at them: a match between an iPhone and a browser, and one between an Android phone and the same
    iPhone, land in logs/apns-peer.jsonl, fcm-peer.jsonl and webpush-peer.jsonl, each checked by its peer (the
    provider token, the service account's grant, VAPID and decryption); the summary says where pushes land, and
    Ctrl-C stops the peers with the rest. `--no-push-peers` (the queue tests in test_notify.py) starts none."""
    import grpc
    from kindred.api.v1 import notify_pb2, notify_pb2_grpc
    running = Cluster()
    pids = running.pids()
    try:
        assert {"apns-peer", "fcm-peer", "webpush-peer"} <= set(pids)
        logs = running.run_dir / "logs"
        summary = next(line for line in running.lines if line.strip().startswith("push:"))
        for name in ("apns-peer", "fcm-peer", "webpush-peer"):
            assert str(logs / f"{name}.jsonl") in summary, summary
        line = next(line for line in running.lines if line.startswith("Started the Web Push peer"))
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        assert port == running.base + 302

        def recorded(name, key, value):
            path = logs / f"{name}.jsonl"
            if not path.exists():
                return []
            return [entry for entry in map(json.loads, path.read_text().splitlines()) if entry.get(key) == value]

        with grpc.insecure_channel(running.gateway) as channel:
            api, stub = FitnessApi(channel), notify_pb2_grpc.NotificationServiceStub(channel)
            ann = FitnessMember(running, api, "Ann", 48.8566, 2.3522)
            bob = FitnessMember(running, api, "Bob", 48.8600, 2.3400)
            cat = FitnessMember(running, api, "Cat", 48.8610, 2.3410)
            ann_token, cat_token = apns_token(), f"fcm-{cat.id}"
            subscription = subscribe(port, running.run_dir / "push")
            register(stub, ann.auth, platform=APNS, token=ann_token)
            register(stub, bob.auth, platform=WEB_PUSH,
                     web_push=notify_pb2.WebPushSubscription(endpoint=subscription["endpoint"],
                                                             p256dh=subscription["p256dh"], auth=subscription["auth"]))
            register(stub, cat.auth, platform=FCM, token=cat_token)
            assert follow(api, ann, bob).match.match_id
            assert follow(api, cat, ann).match.match_id
            eventually(lambda: len(recorded("apns-peer", "device", ann_token)) == 2
                       and recorded("webpush-peer", "subscription", subscription["id"])
                       and recorded("fcm-peer", "registration_token", cat_token),
                       "pushes at the cluster's three peers", SETTLE)
            for entry in (recorded("apns-peer", "device", ann_token) + recorded("fcm-peer", "registration_token", cat_token)
                          + recorded("webpush-peer", "subscription", subscription["id"])):
                assert entry["accepted"], entry
            [push] = recorded("webpush-peer", "subscription", subscription["id"])
            assert push["payload"]["data"]["kind"] == "new_match"
    finally:
        assert_clean_stop(running, pids)
