"""Consent and deletion across every service, end to end through the gateway (Python grpcio, one cluster started by
services/run-cluster.sh, every service real):

- a block is enforced everywhere from the moment Block returns: deck, top picks, member search, likes received,
  matches, chat send, chat history and the live Subscribe stream, on both sides, checked at once (no sleeps,
  no polling); an unblock brings back exactly what the contract says;
- DeleteAccount erases every trace: GetUserFootprint of auth, profile, discovery, match, chat and notify reports zero
  rows and zero photo files once the cluster has settled, even with the user's swipes, messages, uploads and
  moves still in flight when the deletion happened; no outbox keeps the user's events; the other side no
  longer sees the user; signing up again with the same email starts from nothing;
- an admin's DeactivateAccount hides the user everywhere and ReactivateAccount restores everything.

The members are in the fitness community (one-way follows, no photos required), a few km apart in Paris, so
each test sees the others in its deck."""
import hashlib
import io
import os
import signal
import subprocess
import time
import uuid

import grpc
import pytest
from PIL import Image

from acknowledged_writes import all_events_delivered
from cluster_harness import Cluster, assert_clean_stop, bin_dir
from test_chat import Subscription
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_verify, unique
from test_profile import fields

from kindred.api.v1 import (account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc, chat_pb2,  # noqa: E402
                            chat_pb2_grpc, deck_pb2, deck_pb2_grpc, match_pb2, match_pb2_grpc, notify_pb2,
                            notify_pb2_grpc, profile_pb2, profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2  # noqa: E402

BOOTSTRAP_SECRET = "consent-test-bootstrap-secret-0123456789abcdef"
COMMUNITY = "fitness"
LIKE = common_pb2.SWIPE_ACTION_LIKE
SETTLE = 30  # seconds: the bound for anything that travels by events


@pytest.fixture(scope="module")
def cluster():
    # The tests look at decks and move members far more often than people do: discovery's per-viewer call
    # budget and profile's location interval are lifted.
    running = Cluster(KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET, KINDRED_CHAT_HEARTBEAT_MS="1000",
                      KINDRED_PROFILE_LOCATION_INTERVAL_MS="1000", KINDRED_DISCOVERY_VIEWER_RATE="1000",
                      KINDRED_DISCOVERY_VIEWER_BURST="1000")
    assert {"auth", "profile", "discovery", "match", "chat", "notify"} <= set(running.servers())
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


class Api:
    def __init__(self, channel):
        self.accounts = account_pb2_grpc.AccountServiceStub(channel)
        self.profiles = profile_pb2_grpc.ProfileServiceStub(channel)
        self.deck = deck_pb2_grpc.DeckServiceStub(channel)
        self.matches = match_pb2_grpc.MatchServiceStub(channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.notifications = notify_pb2_grpc.NotificationServiceStub(channel)


@pytest.fixture(scope="module")
def api(channel):
    return Api(channel)


class Member:
    """A signed-in fitness member with a profile and a location (so also a deck of their own)."""

    def __init__(self, cluster, api, name, latitude, longitude, email=None):
        self.email, self.username = email or f"{unique('cs-')}@example.com", unique("cs_")
        sign_up_and_verify(cluster, api.accounts, COMMUNITY, self.email, self.username)
        self.sign_in(api)
        self.id = api.profiles.CreateProfile(profile_pb2.CreateProfileRequest(
            fields=fields(name), idempotency_key=str(uuid.uuid4())), metadata=self.auth, timeout=TIMEOUT).profile.user_id
        move(api, self, latitude, longitude)
        # Until discovery holds the member (their own deck answers): only then can anyone swipe on them.
        eventually(lambda: code_of(lambda: api.deck.GetDeck(deck_pb2.GetDeckRequest(page_size=1), metadata=self.auth,
                                                             timeout=TIMEOUT)) == grpc.StatusCode.OK,
                   "discovery indexed the member")

    def sign_in(self, api):
        signed = api.accounts.SignIn(account_pb2.SignInRequest(community_id=COMMUNITY, login=self.email,
                                                               password=PASSWORD), timeout=TIMEOUT)
        self.token = signed.tokens.access_token
        self.auth = self.metadata = bearer(self.token)
        return signed


def move(api, member, latitude, longitude):
    api.profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(
        location=common_pb2.GeoPoint(latitude_deg=latitude, longitude_deg=longitude)), metadata=member.auth,
        timeout=TIMEOUT)


def code_of(call):
    try:
        call()
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


# ---- what one member sees of the others ----

def deck_ids(api, viewer):
    return {card.profile.user_id for card in api.deck.GetDeck(deck_pb2.GetDeckRequest(page_size=50),
                                                              metadata=viewer.auth, timeout=TIMEOUT).cards}


def pick_ids(api, viewer):
    return {card.profile.user_id for card in api.deck.GetRecommendations(deck_pb2.GetRecommendationsRequest(
        limit=10), metadata=viewer.auth, timeout=TIMEOUT).cards}


def member_ids(api, viewer):
    return {card.profile.user_id for card in api.deck.SearchMembers(deck_pb2.SearchMembersRequest(page_size=50),
                                                                    metadata=viewer.auth, timeout=TIMEOUT).cards}


def liker_ids(api, viewer):
    return {like.user_id for like in api.matches.ListLikesReceived(match_pb2.ListLikesReceivedRequest(),
                                                                   metadata=viewer.auth, timeout=TIMEOUT).likes}


def match_partner_ids(api, viewer):
    return {m.profile.user_id for m in api.matches.ListMatches(match_pb2.ListMatchesRequest(), metadata=viewer.auth,
                                                                timeout=TIMEOUT).matches}


def thread_partner_ids(api, viewer):
    return {t.other_user_id for t in api.chat.ListThreads(chat_pb2.ListThreadsRequest(), metadata=viewer.auth,
                                                          timeout=TIMEOUT).threads}


def sees(api, viewer, other):
    """Where `viewer` sees `other`: the names of the lists that show them."""
    lists = {"deck": deck_ids, "top picks": pick_ids, "members": member_ids, "likes": liker_ids,
             "matches": match_partner_ids, "threads": thread_partner_ids}
    return {name for name, ids in lists.items() if other.id in ids(api, viewer)}


def eventually(check, what, timeout=SETTLE):
    """Polls `check` (events travel between services) until it returns a truthy value, within a bound."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.25)


def send(api, sender, thread, body):
    return api.chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id=str(uuid.uuid4()),
                                                            body=body), metadata=sender.auth, timeout=TIMEOUT)


def follow(api, follower, followed):
    return api.deck.Swipe(deck_pb2.SwipeRequest(target_user_id=followed.id, action=LIKE), metadata=follower.auth,
                          timeout=TIMEOUT)


def message_from(stream, sender):
    """The next message of `sender` on the stream (the stream also carries the subscriber's own messages)."""
    while True:
        message = stream.next("message").message
        if message.sender_user_id == sender.id:
            return message


def drain(stream, seconds):
    """Everything the stream delivers within `seconds` (heartbeats left out)."""
    got, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            event = stream.events.get(timeout=max(0.01, deadline - time.monotonic()))
        except Exception:
            break
        if event is None:
            break
        if event.WhichOneof("event") != "heartbeat":
            got.append(event)
    return got


# ---- block ----

def test_a_block_is_enforced_everywhere_from_the_moment_it_returns(cluster, api):
    ann = Member(cluster, api, "Ann", 48.8566, 2.3522)
    ben = Member(cluster, api, "Ben", 48.8700, 2.3700)
    cy = Member(cluster, api, "Cy", 48.8600, 2.3400)
    # Before: each finds the others in the deck, top picks and member search.
    for viewer, others in ((ann, (ben, cy)), (ben, (ann, cy))):
        for other in others:
            eventually(lambda: {"deck", "top picks", "members"} <= sees(api, viewer, other),
                       f"{other.id} in the deck, picks and members of {viewer.id}")
    ann_stream, ben_stream = Subscription(cluster_channel(cluster), ann), Subscription(cluster_channel(cluster), ben)
    try:
        # Ann follows Ben: a connection and its thread, announced live to both.
        connected = follow(api, ann, ben)
        assert connected.outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED
        thread = connected.match.match_id
        for stream in (ann_stream, ben_stream):
            assert stream.next("match_created", timeout=SETTLE).match_created.match.match_id == thread
        send(api, ann, thread, "hi Ben")
        assert message_from(ben_stream, ann).body == "hi Ben"
        send(api, ben, thread, "hi Ann")
        assert message_from(ann_stream, ben).body == "hi Ann"
        assert {"deck", "top picks", "members", "likes", "matches", "threads"} <= sees(api, ben, ann)
        assert {"members", "matches", "threads"} <= sees(api, ann, ben)

        blocked = api.matches.Block(match_pb2.BlockRequest(target_user_id=ben.id), metadata=ann.auth, timeout=TIMEOUT)
        assert blocked.ended_match_id == thread
        # At once, on both sides: chat refuses the thread, and nothing of the other shows anywhere.
        for sender in (ben, ann):
            assert code_of(lambda: send(api, sender, thread, "still there?")) in (
                grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND), sender.id
        assert sees(api, ben, ann) == set() and sees(api, ann, ben) == set()
        for sender in (ann, ben):
            assert code_of(lambda: api.chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=sender.auth,
                                                    timeout=TIMEOUT)) == grpc.StatusCode.NOT_FOUND, sender.id
            assert code_of(lambda: api.chat.SendTyping(chat_pb2.SendTypingRequest(thread_id=thread),
                                                       metadata=sender.auth, timeout=TIMEOUT)) != grpc.StatusCode.OK
        assert code_of(lambda: follow(api, ben, ann)) == grpc.StatusCode.NOT_FOUND
        # The live streams: the thread's closing (already in each user's log when Block returned), then nothing
        # of the other side.
        for stream in (ann_stream, ben_stream):
            assert stream.next("thread_closed", timeout=5).thread_closed.thread_id == thread
        for stream, other in ((ann_stream, ben), (ben_stream, ann)):
            leaked = [e for e in drain(stream, 0.5) if e.WhichOneof("event") in ("message", "typing", "read_receipt")]
            assert leaked == [], leaked
        # Cy, whom nobody blocked, still sees both.
        assert {"deck", "members"} <= sees(api, cy, ann) and {"deck", "members"} <= sees(api, cy, ben)

        # Unblock (contract: lifts the block, does not restore the match): the ended connection keeps the pair
        # apart in decks and search, the thread stays closed; the block list is empty again.
        api.matches.Unblock(match_pb2.UnblockRequest(target_user_id=ben.id), metadata=ann.auth, timeout=TIMEOUT)
        assert not api.matches.ListBlocks(match_pb2.ListBlocksRequest(), metadata=ann.auth, timeout=TIMEOUT).blocks
        assert sees(api, ann, ben) == set() and sees(api, ben, ann) == set()
        assert code_of(lambda: send(api, ben, thread, "back?")) in (grpc.StatusCode.FAILED_PRECONDITION,
                                                                    grpc.StatusCode.NOT_FOUND)
    finally:
        ann_stream.cancel()
        ben_stream.cancel()

    # A block without a match: gone at once, and back at once after the unblock (deck, picks, members).
    api.matches.Block(match_pb2.BlockRequest(target_user_id=cy.id), metadata=ben.auth, timeout=TIMEOUT)
    assert sees(api, ben, cy) == set() and sees(api, cy, ben) == set()
    api.matches.Unblock(match_pb2.UnblockRequest(target_user_id=cy.id), metadata=ben.auth, timeout=TIMEOUT)
    assert {"deck", "top picks", "members"} <= sees(api, ben, cy)
    assert {"deck", "top picks", "members"} <= sees(api, cy, ben)


def test_a_block_that_a_consumer_has_not_applied_is_not_reported_done(cluster, api):
    """Chat stopped (SIGSTOP, every replica): Block cannot know chat refuses the thread, so it answers UNAVAILABLE
    (retry) rather than OK; once chat runs again, the retried Block answers OK and is in effect at once."""
    jo = Member(cluster, api, "Jo", 48.8450, 2.3400)
    kim = Member(cluster, api, "Kim", 48.8470, 2.3420)
    thread = follow(api, jo, kim).match.match_id
    eventually(lambda: kim.id in thread_partner_ids(api, jo), "the thread is open")
    send(api, kim, thread, "hello")
    chats = [pid for name, pid in cluster.pids().items() if name.split(".")[0] == "chat"]  # every replica
    for chat in chats:
        os.kill(chat, signal.SIGSTOP)
    try:
        started = time.monotonic()
        refused = code_of(lambda: api.matches.Block(match_pb2.BlockRequest(target_user_id=kim.id), metadata=jo.auth,
                                                    timeout=TIMEOUT))
        assert refused == grpc.StatusCode.UNAVAILABLE, refused
        assert time.monotonic() - started < 10
    finally:
        for chat in chats:
            os.kill(chat, signal.SIGCONT)
    eventually(lambda: code_of(lambda: api.matches.Block(match_pb2.BlockRequest(target_user_id=kim.id),
                                                         metadata=jo.auth, timeout=TIMEOUT)) == grpc.StatusCode.OK,
               "the retried Block answers OK")
    assert code_of(lambda: send(api, kim, thread, "still there?")) in (grpc.StatusCode.FAILED_PRECONDITION,
                                                                      grpc.StatusCode.NOT_FOUND)
    assert sees(api, kim, jo) == set() and sees(api, jo, kim) == set()


_channels = {}


def cluster_channel(cluster):
    """A channel of its own for the Subscribe streams (kept apart from the unary calls)."""
    if cluster.gateway not in _channels:
        _channels[cluster.gateway] = grpc.insecure_channel(cluster.gateway)
    return _channels[cluster.gateway]


# ---- deletion ----

def admin_of(cluster, api):
    """A fitness member made admin with the bootstrap secret; signed in again for a token with the role."""
    admin = Member(cluster, api, "Mod", 45.7640, 4.8357)  # Lyon: far from the Paris members' decks
    api.admin.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET, community_id=COMMUNITY,
                                                             login=admin.email), timeout=TIMEOUT)
    admin.sign_in(api)
    return admin


@pytest.fixture(scope="module")
def admin(cluster, api):
    return admin_of(cluster, api)


def footprint(api, admin, user_id):
    """service -> {kind: rows} from every service's GetUserFootprint (through the admin API)."""
    answer = api.admin.GetUserFootprint(admin_pb2.GetUserFootprintRequest(user_id=user_id), metadata=admin.auth,
                                        timeout=TIMEOUT)
    assert list(answer.unavailable_parts) == [], answer
    counts = {service.service: {count.kind: count.rows for count in service.counts} for service in answer.services}
    assert set(counts) == {"auth", "profile", "discovery", "match", "chat", "notify"}, counts
    assert answer.total_rows == sum(rows for kinds in counts.values() for rows in kinds.values())
    return counts


def nonzero(counts):
    return {f"{service}.{kind}": rows for service, kinds in counts.items() for kind, rows in kinds.items() if rows}


def photo(seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (900, 1200), (seed % 256, 80, 160)).save(out, "JPEG", quality=85)
    return out.getvalue()


def upload(api, member, data):
    def messages():
        yield profile_pb2.UploadPhotoRequest(header=profile_pb2.PhotoUploadHeader(
            content_type="image/jpeg", total_size_bytes=len(data), sha256=hashlib.sha256(data).digest()))
        yield profile_pb2.UploadPhotoRequest(chunk=data)
    return api.profiles.UploadPhoto(messages(), metadata=member.auth, timeout=TIMEOUT)


SCHEMAS_WITH_OUTBOX = ("auth", "profile", "match")


def outbox_rows_about(cluster, user_id):
    """Events about the user still stored in a producer's outbox (profile snapshots, swipes, blocks), the deletion
    notices aside (they carry the id alone, and are what makes the erasure reach every consumer)."""
    found = {}
    for schema in SCHEMAS_WITH_OUTBOX:
        rows = cluster.psql(
            f"SELECT count(*) FROM {schema}.events_outbox WHERE (user_id = '{user_id}' OR partition_key = '{user_id}') "
            f"AND event_type <> 'account.deleted'")
        if int(rows):
            found[schema] = int(rows)
    return found


def pending_deliveries(cluster):
    """1 while an event of a producer with an outbox has not reached every consumer (acknowledged_writes'
    `all_events_delivered`: the push relay's cursors, or on NATS JetStream every consumer's inbox), else 0."""
    return 0 if all_events_delivered(cluster, SCHEMAS_WITH_OUTBOX) else 1


def orphan_photo_bytes(cluster):
    """Stored photo bytes no rendition references (what an erasure would leave behind)."""
    return int(cluster.psql("SELECT count(*) FROM profile.photo_blobs b WHERE NOT EXISTS "
                            "(SELECT 1 FROM profile.photo_variants v WHERE v.blob_key = b.key)"))


# ---- deactivation ----

def test_deactivation_hides_everywhere_and_reactivation_restores_everything(cluster, api, admin):
    gus = Member(cluster, api, "Gus", 48.8490, 2.3550)
    hal = Member(cluster, api, "Hal", 48.8640, 2.3610)
    ivy = Member(cluster, api, "Ivy", 48.8560, 2.3620)
    thread = follow(api, gus, hal).match.match_id
    eventually(lambda: hal.id in thread_partner_ids(api, gus), "the thread is open")
    send(api, gus, thread, "hi Hal")
    eventually(lambda: {"deck", "members"} <= sees(api, ivy, gus), "Gus in Ivy's deck and members")
    eventually(lambda: {"deck", "members", "likes", "matches", "threads"} <= sees(api, hal, gus), "Gus seen by Hal")

    api.admin.DeactivateAccount(admin_pb2.DeactivateAccountRequest(user_id=gus.id, note="test"), metadata=admin.auth,
                                timeout=TIMEOUT)
    eventually(lambda: sees(api, hal, gus) == set() and sees(api, ivy, gus) == set(), "Gus hidden everywhere")
    assert code_of(lambda: send(api, hal, thread, "are you there?")) in (grpc.StatusCode.FAILED_PRECONDITION,
                                                                         grpc.StatusCode.NOT_FOUND)
    assert code_of(lambda: gus.sign_in(api)) != grpc.StatusCode.OK
    assert code_of(lambda: api.matches.ListMatches(match_pb2.ListMatchesRequest(), metadata=gus.auth,
                                                   timeout=TIMEOUT)) == grpc.StatusCode.UNAUTHENTICATED

    api.admin.ReactivateAccount(admin_pb2.ReactivateAccountRequest(user_id=gus.id, note="test"), metadata=admin.auth,
                                timeout=TIMEOUT)
    gus.sign_in(api)
    eventually(lambda: {"deck", "members", "likes", "matches", "threads"} <= sees(api, hal, gus),
               "Gus back for Hal")
    eventually(lambda: {"deck", "members"} <= sees(api, ivy, gus), "Gus back in Ivy's deck and members")
    assert {"members", "matches", "threads"} <= sees(api, gus, hal)
    send(api, hal, thread, "welcome back")
    history = api.chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=gus.auth, timeout=TIMEOUT)
    assert [m.body for m in history.messages] == ["welcome back", "hi Hal"]


@pytest.fixture(scope="module", autouse=True)
def dee(cluster, api):
    """The member the deletion test (the file's last) deletes, signed up when the module starts: signing up again
    with the same email sends a mail, and auth sends at most one mail a minute to an address."""
    return Member(cluster, api, "Dee", 48.8530, 2.3499)


def test_a_deleted_account_leaves_no_trace_in_any_service(cluster, api, admin, dee):
    eli = Member(cluster, api, "Eli", 48.8610, 2.3360)
    fay = Member(cluster, api, "Fay", 48.8580, 2.3450)
    upload(api, dee, photo(1))
    thread = follow(api, dee, eli).match.match_id
    assert follow(api, eli, dee).match.match_id == thread  # followed back: mutual
    eventually(lambda: eli.id in thread_partner_ids(api, dee), "the thread is open")
    send(api, dee, thread, "hello Eli")
    send(api, eli, thread, "hello Dee")
    api.matches.Block(match_pb2.BlockRequest(target_user_id=fay.id), metadata=eli.auth, timeout=TIMEOUT)
    api.matches.Unblock(match_pb2.UnblockRequest(target_user_id=fay.id), metadata=eli.auth, timeout=TIMEOUT)
    api.notifications.RegisterDevice(notify_pb2.RegisterDeviceRequest(
        platform=notify_pb2.PUSH_PLATFORM_FCM, token=f"fcm-{dee.id}", app_id="dev.kindred.fitness"),
        metadata=dee.auth, timeout=TIMEOUT)
    api.notifications.UpdateNotificationSettings(notify_pb2.UpdateNotificationSettingsRequest(
        settings=notify_pb2.NotificationSettings(new_match=True)), metadata=dee.auth, timeout=TIMEOUT)
    before = footprint(api, admin, dee.id)
    assert {"auth.accounts", "profile.profiles", "profile.photos", "discovery.candidates", "match.swipes_given",
            "chat.messages"} & set(nonzero(before)), nonzero(before)
    assert {"notify.devices", "notify.settings"} <= set(nonzero(before)), nonzero(before)

    # Events in flight: a swipe, a message, an upload, a move and a profile edit, and at once the deletion.
    follow(api, dee, fay)
    send(api, dee, thread, "last words")
    upload(api, dee, photo(2))
    move(api, dee, 48.8600, 2.3500)
    api.profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(fields=types_pb2.ProfileFields(bio="bye"),
                                                                update_paths=["bio"]), metadata=dee.auth,
                               timeout=TIMEOUT)
    api.accounts.DeleteAccount(account_pb2.DeleteAccountRequest(current_password=PASSWORD), metadata=dee.auth,
                               timeout=TIMEOUT)

    # Settled: every relay delivered everything, and then nothing of Dee is left anywhere.
    eventually(lambda: not nonzero(footprint(api, admin, dee.id)) and pending_deliveries(cluster) == 0,
               "footprint zero with every outbox delivered")
    time.sleep(1)  # a late event would have re-created something by now
    assert pending_deliveries(cluster) == 0
    assert nonzero(footprint(api, admin, dee.id)) == {}
    assert orphan_photo_bytes(cluster) == 0
    assert outbox_rows_about(cluster, dee.id) == {}, "an outbox keeps events about the deleted account"

    # The others no longer see Dee anywhere.
    for other in (eli, fay):
        assert sees(api, other, dee) == set(), other.id
    assert code_of(lambda: api.chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=eli.auth,
                                            timeout=TIMEOUT)) == grpc.StatusCode.NOT_FOUND
    # The old token is dead; signing up again with the same email starts from nothing.
    assert code_of(lambda: api.profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=dee.auth,
                                                     timeout=TIMEOUT)) == grpc.StatusCode.UNAUTHENTICATED
    again = Member.__new__(Member)
    again.email, again.username = dee.email, unique("cs_")
    eventually(lambda: code_of(lambda: api.accounts.SignUp(account_pb2.SignUpRequest(
        community_id=COMMUNITY, email=again.email, username=again.username, password=PASSWORD),
        timeout=TIMEOUT)) == grpc.StatusCode.OK, "sign-up again (one mail a minute per address)", timeout=70)
    # The newest mail to the address may still be the first account's for a moment: retry until the code works.
    eventually(lambda: code_of(lambda: api.accounts.VerifyEmail(account_pb2.VerifyEmailRequest(
        code=account_pb2.VerificationCode(community_id=COMMUNITY, email=again.email,
                                          code=cluster.verification_code(again.email))), timeout=TIMEOUT))
               == grpc.StatusCode.OK, "the new account verified")
    signed = again.sign_in(api)
    again.id = signed.account.user_id
    assert again.id != dee.id
    assert code_of(lambda: api.profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=again.auth,
                                                     timeout=TIMEOUT)) == grpc.StatusCode.NOT_FOUND
    assert match_partner_ids(api, again) == set() and thread_partner_ids(api, again) == set()
    assert liker_ids(api, again) == set()
    # Only auth's rows of the new account (its account, session, mails): nothing carried over from before.
    assert {kind.split(".")[0] for kind in nonzero(footprint(api, admin, again.id))} == {"auth"}


# ---- moderation ----

def kindred(cluster, config_dir, *args, stdin=""):
    env = dict(os.environ, KINDRED_GATEWAY=cluster.gateway, KINDRED_COMMUNITY=COMMUNITY,
               KINDRED_CONFIG_DIR=str(config_dir))
    return subprocess.run([str(bin_dir() / "kindred"), *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_an_admin_reads_report_evidence_and_removes_only_the_reported_members_photos(cluster, api, admin,
                                                                                      tmp_path):
    """GetReportEvidence gives the report, the messages it names of the thread between reporter and reported member
    (the reported member's messages to someone else stay private even when the report names them) and the reported
    member's profile; ResolveReport(CONTENT_REMOVED) deletes the named photos that are the reported member's, and
    only then records the decision. Members of the public get PERMISSION_DENIED."""
    rita = Member(cluster, api, "Rita", 43.2965, 5.3698)  # Marseille: away from the Paris members' decks
    rex = Member(cluster, api, "Rex", 43.3000, 5.3750)
    sue = Member(cluster, api, "Sue", 43.2900, 5.3600)
    offending, kept = upload(api, rex, photo(7)).photo.photo_id, upload(api, rex, photo(8)).photo.photo_id
    sues = upload(api, sue, photo(9)).photo.photo_id
    with_rita, with_sue = follow(api, rita, rex).match.match_id, follow(api, sue, rex).match.match_id
    eventually(lambda: {rita.id, sue.id} <= thread_partner_ids(api, rex), "both threads are open")
    to_rita = send(api, rex, with_rita, "you will regret this").message.message_id
    to_sue = send(api, rex, with_sue, "a private word to Sue").message.message_id
    report = api.matches.ReportUser(match_pb2.ReportUserRequest(
        target_user_id=rex.id, reason=common_pb2.REPORT_REASON_HARASSMENT, details="threats",
        message_ids=[to_rita, to_sue, "not-a-message-id"], photo_ids=[offending], idempotency_key="evidence-1"),
        metadata=rita.auth, timeout=TIMEOUT).report_id

    evidence = api.admin.GetReportEvidence(admin_pb2.GetReportEvidenceRequest(report_id=report), metadata=admin.auth,
                                           timeout=TIMEOUT)
    assert evidence.report.report_id == report and evidence.report.reported_user_id == rex.id
    assert [m.body for m in evidence.messages] == ["you will regret this"], "only the thread Rita was part of"
    assert evidence.reported_profile.user_id == rex.id
    assert {p.photo_id for p in evidence.reported_profile.photos} == {offending, kept}
    for caller in (rita, rex):
        assert code_of(lambda: api.admin.GetReportEvidence(admin_pb2.GetReportEvidenceRequest(report_id=report),
                                                           metadata=caller.auth, timeout=TIMEOUT)) \
            == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(lambda: api.admin.GetReportEvidence(admin_pb2.GetReportEvidenceRequest(
        report_id=str(uuid.uuid4())), metadata=admin.auth, timeout=TIMEOUT)) == grpc.StatusCode.NOT_FOUND

    # The same through the CLI.
    assert kindred(cluster, tmp_path, "signin", admin.email, stdin=PASSWORD + "\n").returncode == 0
    shown = kindred(cluster, tmp_path, "admin", "reports", "show", report)
    assert shown.returncode == 0, shown.stderr
    assert "you will regret this" in shown.stdout and "Sue" not in shown.stdout and offending in shown.stdout

    def resolve(resolution, photo_ids):
        return api.admin.ResolveReport(admin_pb2.ResolveReportRequest(
            report_id=report, resolution=resolution, note="threats", remove_photo_ids=photo_ids),
            metadata=admin.auth, timeout=TIMEOUT)

    # Photos go with CONTENT_REMOVED only; nothing happens otherwise.
    assert code_of(lambda: resolve(admin_pb2.REPORT_RESOLUTION_WARNING_SENT, [offending])) \
        == grpc.StatusCode.INVALID_ARGUMENT
    # Sue's photo is named too: it is not the reported member's, so it stays.
    resolved = resolve(admin_pb2.REPORT_RESOLUTION_CONTENT_REMOVED, [offending, sues])
    assert resolved.report.status == admin_pb2.REPORT_STATUS_RESOLVED
    own = api.profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=rex.auth, timeout=TIMEOUT)
    assert [p.photo_id for p in own.profile.photos] == [kept]
    own = api.profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=sue.auth, timeout=TIMEOUT)
    assert [p.photo_id for p in own.profile.photos] == [sues]
    # A retry of the same decision is idempotent; another decision is refused before any photo is touched.
    assert resolve(admin_pb2.REPORT_RESOLUTION_CONTENT_REMOVED, [offending]).report.status \
        == admin_pb2.REPORT_STATUS_RESOLVED
    assert code_of(lambda: resolve(admin_pb2.REPORT_RESOLUTION_NO_ACTION, [])) == grpc.StatusCode.FAILED_PRECONDITION
