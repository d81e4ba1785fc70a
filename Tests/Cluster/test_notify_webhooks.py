"""Webhooks of the app team's backend in a running cluster, against the independent receiver of Tests/Peers
(`webhook_receiver.py`: the `standardwebhooks` package verifies every delivery, over `h2` with TLS), with a throwaway
CA made for this run. Through the gateway: only admins manage endpoints and bad URLs are refused; two members who
connect produce one signed `match.created` delivery per endpoint, ids only; a 500 is retried with the same
webhook-id; a 429 slows that endpoint alone and a slow endpoint times out alone; a 410 disables the endpoint; a
rotated secret and the previous one both verify during the grace period; a replay arrives again with the same id;
a deleted member leaves no delivery naming them; kill -9 of notify-server in the middle of a burst loses nothing."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import grpc
import pytest

from cluster_harness import ROOT, Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT
from test_consent import BOOTSTRAP_SECRET, Api, Member, admin_of, code_of, footprint, follow
from test_notify_push import Peer

from kindred.api.v1 import account_pb2, webhooks_pb2  # noqa: E402

PEERS = ROOT / "Tests" / "Peers"
SETTLE = 30  # seconds: match's event reaching notify and the sender's poll
LEASE = 32  # seconds: the claim lease of a killed sender (the 1 s timeout + 30 s), and a little more


class Receiver(Peer):
    """The webhook receiver, with the secrets it verifies with per target (a JSON file it re-reads)."""

    def __init__(self, folder):
        self.secrets_file = folder / "webhook-secrets.json"
        self.secrets_file.write_text("{}")
        self.secrets = {}
        super().__init__("webhook_receiver.py", folder, ["--port", "0", "--secrets", str(self.secrets_file)])

    def trust(self, target, *secrets):
        self.secrets[target] = list(secrets)
        temporary = self.secrets_file.with_suffix(".new")
        temporary.write_text(json.dumps(self.secrets))
        temporary.rename(self.secrets_file)

    def url(self, target):
        return f"https://127.0.0.1:{self.port}/hooks/{target}"

    def to(self, target):
        return [entry for entry in self.entries() if entry["target"] == target]


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    folder = tmp_path_factory.mktemp("webhook-keys")
    subprocess.run([sys.executable, str(PEERS / "push_test_keys.py"), str(folder)], check=True, capture_output=True)
    running = Receiver(folder)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def cluster(receiver):
    running = Cluster(
        KINDRED_ON_SERVER_EXIT="restart", KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET,
        KINDRED_NOTIFY_WEBHOOK_CA_FILE=str(receiver.record.parent / "ca.pem"),
        KINDRED_NOTIFY_WEBHOOK_RETRY_FIRST_MS="300", KINDRED_NOTIFY_WEBHOOK_POLL_MS="100",
        KINDRED_NOTIFY_WEBHOOK_TIMEOUT_MS="1000")
    pids = running.pids()
    yield running
    assert_clean_stop(running, {name: pid for name, pid in pids.items() if name != "notify"})


@pytest.fixture(scope="module")
def api(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield Api(channel)


@pytest.fixture(scope="module")
def admin(cluster, api):
    return admin_of(cluster, api)


def unknown_id():
    """A well-formed UUIDv7 nothing has."""
    raw = f"{int(time.time() * 1000):012x}7{uuid.uuid4().hex[13:]}"
    return str(uuid.UUID(raw[:16] + "8" + raw[17:]))


def eventually(condition, what, timeout=SETTLE):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def create(api, admin, receiver, target, events=("match.created",)):
    """An endpoint of the receiver's `target`, trusted with its secret; removed again at the test's end."""
    created = api.admin.CreateWebhookEndpoint(webhooks_pb2.CreateWebhookEndpointRequest(
        url=receiver.url(target), event_types=list(events), description=f"test {target}"), metadata=admin.auth,
        timeout=TIMEOUT)
    assert created.secret.startswith("whsec_") and created.endpoint.enabled
    receiver.trust(target, created.secret)
    return created


@pytest.fixture
def endpoints(api, admin):
    made = []
    yield made
    for endpoint_id in made:
        # After a restart notify answers UNAVAILABLE until it has news from auth again.
        eventually(lambda: code_of(lambda: api.admin.DeleteWebhookEndpoint(webhooks_pb2.DeleteWebhookEndpointRequest(
            endpoint_id=endpoint_id), metadata=admin.auth, timeout=TIMEOUT)) == grpc.StatusCode.OK, "the endpoint removed")


def deliveries(api, admin, endpoint_id):
    return api.admin.ListWebhookDeliveries(webhooks_pb2.ListWebhookDeliveriesRequest(
        endpoint_id=endpoint_id, page_size=100), metadata=admin.auth, timeout=TIMEOUT).deliveries


def about(entries, match_id):
    return [entry for entry in entries if entry.get("body", {}).get("data", {}).get("match_id") == match_id]


def connect(cluster, api, name):
    first = Member(cluster, api, f"{name}1", 48.8566, 2.3522)
    second = Member(cluster, api, f"{name}2", 48.8600, 2.3400)
    match_id = follow(api, first, second).match.match_id
    assert match_id
    return first, second, match_id


def test_only_admins_manage_endpoints_and_bad_input_changes_nothing(cluster, api, admin, receiver):
    member = Member(cluster, api, "Nim", 48.8566, 2.3522)
    request = webhooks_pb2.CreateWebhookEndpointRequest(url=receiver.url("denied"), event_types=["match.created"])
    assert code_of(lambda: api.admin.CreateWebhookEndpoint(request, metadata=member.auth, timeout=TIMEOUT)) \
        == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(lambda: api.admin.ListWebhookEndpoints(webhooks_pb2.ListWebhookEndpointsRequest(),
                                                          metadata=member.auth, timeout=TIMEOUT)) \
        == grpc.StatusCode.PERMISSION_DENIED
    before = api.admin.ListWebhookEndpoints(webhooks_pb2.ListWebhookEndpointsRequest(), metadata=admin.auth,
                                            timeout=TIMEOUT).endpoints
    for url, events in [("http://example.com/hook", ["match.created"]), ("ftp://127.0.0.1/hook", ["match.created"]),
                        ("https://", ["match.created"]), ("https://user@example.com/x", ["match.created"]),
                        ("https://example.com/a b", ["match.created"]), (receiver.url("x"), []),
                        (receiver.url("x"), ["match.liked"]), ("https://example.com/" + "a" * 2048, ["match.created"])]:
        bad = webhooks_pb2.CreateWebhookEndpointRequest(url=url, event_types=events)
        assert code_of(lambda: api.admin.CreateWebhookEndpoint(bad, metadata=admin.auth, timeout=TIMEOUT)) \
            == grpc.StatusCode.INVALID_ARGUMENT, (url, events)
    assert code_of(lambda: api.admin.RotateWebhookSecret(webhooks_pb2.RotateWebhookSecretRequest(
        endpoint_id="not-an-id"), metadata=admin.auth, timeout=TIMEOUT)) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(lambda: api.admin.RotateWebhookSecret(webhooks_pb2.RotateWebhookSecretRequest(
        endpoint_id=unknown_id()), metadata=admin.auth, timeout=TIMEOUT)) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: api.admin.ReplayWebhookDelivery(webhooks_pb2.ReplayWebhookDeliveryRequest(
        delivery_id=unknown_id()), metadata=admin.auth, timeout=TIMEOUT)) == grpc.StatusCode.NOT_FOUND
    after = api.admin.ListWebhookEndpoints(webhooks_pb2.ListWebhookEndpointsRequest(), metadata=admin.auth,
                                           timeout=TIMEOUT).endpoints
    assert list(after) == list(before)


def test_a_match_reaches_each_endpoint_once_signed_with_ids_only(cluster, api, admin, receiver, endpoints):
    endpoint = create(api, admin, receiver, "match").endpoint
    other = create(api, admin, receiver, "match-too").endpoint
    endpoints += [endpoint.endpoint_id, other.endpoint_id]
    first, second, match_id = connect(cluster, api, "Wm")
    for target in ("match", "match-too"):
        [entry] = eventually(lambda: about(receiver.to(target), match_id), f"the delivery to {target}")
        assert entry["verified_with"] == [0] and entry["status"] == 204 and entry["content_type"] == "application/json"
        body = entry["body"]
        assert body["type"] == "match.created" and body["timestamp"].endswith("Z")
        assert body["data"] == {"match_id": match_id, "user_ids": sorted([first.id, second.id]),
                                "community_id": "fitness", "mode": "one_way"}
        assert first.email not in json.dumps(body) and second.email not in json.dumps(body)
    time.sleep(2)  # a second delivery of the same event would have come by now
    assert len(about(receiver.to("match"), match_id)) == 1
    [delivery] = [d for d in deliveries(api, admin, endpoint.endpoint_id) if d.delivery_id ==
                  about(receiver.to("match"), match_id)[0]["webhook_id"]]
    assert delivery.state == webhooks_pb2.WEBHOOK_DELIVERY_STATE_DELIVERED and delivery.attempts == 1
    assert delivery.event_type == "match.created" and delivery.last_status == 204


def test_a_500_is_retried_with_the_same_webhook_id(cluster, api, admin, receiver, endpoints):
    endpoint = create(api, admin, receiver, "flaky").endpoint
    endpoints.append(endpoint.endpoint_id)
    receiver.set_rules({"flaky": {"status": 500, "times": 2}})
    _, _, match_id = connect(cluster, api, "Wr")
    entries = eventually(lambda: [e for e in about(receiver.to("flaky"), match_id) if e["status"] == 204] and
                         about(receiver.to("flaky"), match_id), "the delivery after two 500s")
    assert [entry["status"] for entry in entries] == [500, 500, 204]
    assert len({entry["webhook_id"] for entry in entries}) == 1
    assert all(entry["verified_with"] == [0] for entry in entries)
    assert float(entries[1]["time"]) - float(entries[0]["time"]) >= 0.2  # backed off (300 ms ± 20 %)
    [delivery] = [d for d in deliveries(api, admin, endpoint.endpoint_id) if d.delivery_id == entries[0]["webhook_id"]]
    assert delivery.state == webhooks_pb2.WEBHOOK_DELIVERY_STATE_DELIVERED and delivery.attempts == 3


def test_a_429_slows_that_endpoint_alone_and_a_slow_endpoint_times_out_alone(cluster, api, admin, receiver,
                                                                               endpoints):
    busy = create(api, admin, receiver, "busy").endpoint
    slow = create(api, admin, receiver, "slow").endpoint
    quick = create(api, admin, receiver, "quick").endpoint
    endpoints += [busy.endpoint_id, slow.endpoint_id, quick.endpoint_id]
    receiver.set_rules({"busy": {"status": 429, "retry_after": 3, "times": 1},
                        "slow": {"delay_ms": 5000, "times": 1}})
    _, _, match_id = connect(cluster, api, "Wb")
    busy_entries = eventually(lambda: len(about(receiver.to("busy"), match_id)) >= 2 and
                              about(receiver.to("busy"), match_id), "the busy endpoint's retry")
    [quick_entry] = about(receiver.to("quick"), match_id)
    assert [entry["status"] for entry in busy_entries] == [429, 204]
    assert float(busy_entries[1]["time"]) - float(busy_entries[0]["time"]) >= 2.5  # Retry-After: 3 (± jitter)
    assert float(quick_entry["time"]) < float(busy_entries[1]["time"])
    slow_entries = eventually(lambda: len(about(receiver.to("slow"), match_id)) >= 2 and
                              about(receiver.to("slow"), match_id), "the slow endpoint's retry")
    assert float(quick_entry["time"]) < float(slow_entries[0]["time"]) + 1  # not held up by the slow one
    assert len({entry["webhook_id"] for entry in slow_entries}) == 1
    [delivery] = [d for d in deliveries(api, admin, slow.endpoint_id) if d.delivery_id == slow_entries[0]["webhook_id"]]
    eventually(lambda: [d for d in deliveries(api, admin, slow.endpoint_id)
                        if d.state == webhooks_pb2.WEBHOOK_DELIVERY_STATE_DELIVERED], "the slow delivery recorded")
    [delivery] = deliveries(api, admin, slow.endpoint_id)
    assert delivery.attempts == 2


def test_a_410_disables_the_endpoint(cluster, api, admin, receiver, endpoints):
    endpoint = create(api, admin, receiver, "gone").endpoint
    endpoints.append(endpoint.endpoint_id)
    receiver.set_rules({"gone": {"status": 410}})
    _, _, match_id = connect(cluster, api, "Wg")
    eventually(lambda: about(receiver.to("gone"), match_id), "the delivery answered 410")
    listed = eventually(lambda: [e for e in api.admin.ListWebhookEndpoints(
        webhooks_pb2.ListWebhookEndpointsRequest(), metadata=admin.auth, timeout=TIMEOUT).endpoints
        if e.endpoint_id == endpoint.endpoint_id and not e.enabled], "the endpoint disabled")
    assert listed[0].disabled_reason == "GONE"
    [delivery] = eventually(lambda: [d for d in deliveries(api, admin, endpoint.endpoint_id)
                                     if d.state == webhooks_pb2.WEBHOOK_DELIVERY_STATE_FAILED], "the delivery failed")
    assert delivery.last_status == 410 and delivery.attempts == 1
    # Nothing more goes to it: the next match is not even queued for a disabled endpoint.
    _, _, later = connect(cluster, api, "Wh")
    time.sleep(2)
    assert about(receiver.to("gone"), later) == []
    receiver.set_rules({})


def test_rotation_signs_with_both_secrets_and_replay_keeps_the_id(cluster, api, admin, receiver, endpoints):
    created = create(api, admin, receiver, "rotated")
    endpoints.append(created.endpoint.endpoint_id)
    rotated = api.admin.RotateWebhookSecret(webhooks_pb2.RotateWebhookSecretRequest(
        endpoint_id=created.endpoint.endpoint_id), metadata=admin.auth, timeout=TIMEOUT)
    assert rotated.secret.startswith("whsec_") and rotated.secret != created.secret
    assert rotated.endpoint.previous_secret_expires_unix_ms > time.time() * 1000 + 3600 * 1000
    # The table holds both secrets sealed (AES-256-GCM under KINDRED_NOTIFY_WEBHOOK_KEY), neither in the clear.
    stored = stored_secrets(cluster, created.endpoint.endpoint_id)
    assert stored.endswith("|true") and len(stored.split("|")[1]) > 0, stored
    for secret in (created.secret, rotated.secret):
        assert secret_hex(secret) not in stored, "a webhook secret stored in the clear"
    # The backend knows the new secret and the old one (as it would while switching over): both verify.
    receiver.trust("rotated", created.secret, rotated.secret)
    _, _, match_id = connect(cluster, api, "Wk")
    [entry] = eventually(lambda: about(receiver.to("rotated"), match_id), "the delivery after rotation")
    assert entry["verified_with"] == [0, 1], entry
    assert len(entry["signature"].split(" ")) == 2
    # A backend that knows only one of the two secrets verifies it all the same; a wrong secret does not.
    replay = api.admin.ReplayWebhookDelivery(webhooks_pb2.ReplayWebhookDeliveryRequest(
        delivery_id=entry["webhook_id"]), metadata=admin.auth, timeout=TIMEOUT).delivery
    assert replay.state == webhooks_pb2.WEBHOOK_DELIVERY_STATE_PENDING and replay.delivery_id == entry["webhook_id"]
    receiver.trust("rotated", "whsec_" + "A" * 43 + "=", rotated.secret)
    again = eventually(lambda: about(receiver.to("rotated"), match_id)[1:], "the replayed delivery")
    assert again[0]["webhook_id"] == entry["webhook_id"] and again[0]["verified_with"] == [1]
    assert again[0]["body"] == entry["body"]


def test_the_receiver_refuses_a_bad_signature_and_an_old_timestamp(receiver):
    import base64
    import hashlib
    import hmac

    import ssl

    import httpx
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    receiver.trust("forged", secret)
    body = b'{"data":{},"timestamp":"2026-01-01T00:00:00.000Z","type":"match.created"}'

    def post(timestamp, key):
        signature = base64.b64encode(hmac.new(key, f"msg_1.{timestamp}.".encode() + body, hashlib.sha256).digest())
        headers = {"webhook-id": "msg_1", "webhook-timestamp": str(timestamp), "content-type": "application/json",
                   "webhook-signature": "v1," + signature.decode()}
        trust = ssl.create_default_context(cafile=receiver.record.parent / "ca.pem")
        with httpx.Client(http2=True, verify=trust) as client:
            return client.post(receiver.url("forged"), content=body, headers=headers).status_code

    assert post(int(time.time()), b"k" * 32) == 204
    assert post(int(time.time()), b"x" * 32) == 400
    assert post(int(time.time()) - 3600, b"k" * 32) == 400


def test_a_deleted_member_leaves_no_delivery_naming_them(cluster, api, admin, receiver, endpoints):
    endpoint = create(api, admin, receiver, "erasure", events=("match.created", "account.deleted")).endpoint
    endpoints.append(endpoint.endpoint_id)
    first, second, match_id = connect(cluster, api, "Wd")
    eventually(lambda: about(receiver.to("erasure"), match_id), "the match delivered")
    assert footprint(api, admin, first.id)["notify"]["webhook_deliveries"] == 1
    api.accounts.DeleteAccount(account_pb2.DeleteAccountRequest(current_password=PASSWORD), metadata=first.auth,
                               timeout=TIMEOUT)
    notice = eventually(lambda: [e for e in receiver.to("erasure") if e.get("body", {}).get("type") ==
                                 "account.deleted" and e["body"]["data"]["user_id"] == first.id], "the deletion notice")
    assert notice[0]["body"]["data"] == {"user_id": first.id, "community_id": "fitness"}
    eventually(lambda: footprint(api, admin, first.id)["notify"]["webhook_deliveries"] == 0, "the deliveries erased")
    stored = cluster.psql(f"SELECT count(*) FROM notify.webhook_deliveries WHERE body LIKE '%{first.id}%' "
                          "AND event_type <> 'account.deleted'").strip()
    assert stored == "0"
    assert footprint(api, admin, second.id)["notify"]["webhook_deliveries"] == 0  # the match named both


def stored_secrets(cluster, endpoint_id):
    """`<secret hex>|<previous secret hex>|<sealed t/f>` as notify's table holds them."""
    return cluster.psql(f"SELECT encode(secret, 'hex') || '|' || coalesce(encode(previous_secret, 'hex'), '') || '|' "
                        f"|| secrets_sealed FROM notify.webhook_endpoints WHERE endpoint_id = '{endpoint_id}'").strip()


def secret_hex(text):
    import base64
    return base64.b64decode(text.removeprefix("whsec_")).hex()


def test_kill_9_of_notify_mid_burst_loses_nothing(cluster, api, admin, receiver, endpoints):
    endpoint = create(api, admin, receiver, "burst").endpoint
    endpoints.append(endpoint.endpoint_id)
    # An endpoint as an older version stored it, its secret in the clear: the restarted notify seals it and signs
    # with it as before.
    import base64
    import secrets
    legacy_id, legacy_key = unknown_id(), secrets.token_bytes(32)
    cluster.psql(f"INSERT INTO notify.webhook_endpoints (endpoint_id, url, event_types, secret) VALUES "
                 f"('{legacy_id}', '{receiver.url('legacy')}', '{{match.created}}', '\\x{legacy_key.hex()}')")
    endpoints.append(legacy_id)
    receiver.trust("legacy", "whsec_" + base64.b64encode(legacy_key).decode())
    receiver.set_rules({"burst": {"delay_ms": 300}})
    members = [Member(cluster, api, f"Wx{i}", 48.8566, 2.3522) for i in range(7)]
    match_ids = []
    for i, follower in enumerate(members):
        for followed in members[i + 1:i + 4]:
            match_ids.append(follow(api, follower, followed).match.match_id)
    eventually(lambda: [e for e in receiver.to("burst") if e.get("body", {}).get("data", {}).get("match_id") in match_ids],
               "the burst under way")
    old = cluster.pids()["notify"]
    os.kill(old, signal.SIGKILL)
    eventually(lambda: cluster.pids()["notify"] != old, "notify restarted")
    received = lambda: {e["body"]["data"]["match_id"] for e in receiver.to("burst") if e["status"] == 204}  # noqa: E731
    eventually(lambda: set(match_ids) <= received(), "every match delivered after the kill", timeout=SETTLE + LEASE)
    by_match = {}
    for entry in receiver.to("burst"):
        by_match.setdefault(entry["body"]["data"]["match_id"], set()).add(entry["webhook_id"])
    assert all(len(ids) == 1 for ids in by_match.values()), "a match delivered under two webhook-ids"
    receiver.set_rules({})

    def sealed():
        stored = stored_secrets(cluster, legacy_id)
        return stored if stored.endswith("|true") else None

    # The restarted notify seals it as it starts; another replica may have delivered the burst before that.
    stored = eventually(sealed, "the restarted notify sealed the legacy secret")
    assert legacy_key.hex() not in stored, stored
    _, _, match_id = connect(cluster, api, "Wl")
    [entry] = eventually(lambda: about(receiver.to("legacy"), match_id), "a delivery signed with the sealed secret")
    assert entry["status"] == 204 and entry["verified_with"] == [0], entry
