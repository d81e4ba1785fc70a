"""What the fault test (test_faults.py) and the soak (Tests/Soak/soak.py) share: members of a mutual community of
their own, a load driver that records every acknowledged swipe, match and message (every call retried on a
transient error with the same idempotency key) and reads every member's Subscribe stream, the faults themselves
(kill -9 of a server or of PostgreSQL, awaited until run-cluster.sh has restarted it), and the check afterwards:
everything acknowledged is stored exactly once, every event reached its consumers, decks answer and every
resumed stream received each message of its member's threads exactly once."""
import os
import pathlib
import random
import signal
import subprocess
import threading
import time
import uuid

import grpc

from cluster_config import CLUSTER
from cluster_harness import bin_dir
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_verify, unique

from kindred.api.v1 import (account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc, chat_pb2,  # noqa: E402
                            chat_pb2_grpc, deck_pb2, deck_pb2_grpc, profile_pb2, profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2, community_pb2  # noqa: E402

BOOTSTRAP_SECRET = "faults-test-bootstrap-secret-0123456789abcdef"
SERVICES = ("auth", "profile", "discovery", "match", "chat", "gateway")
LIKE, PASS = common_pb2.SWIPE_ACTION_LIKE, common_pb2.SWIPE_ACTION_PASS
# What a call may fail with while a server or PostgreSQL is down; the driver retries those with the same
# idempotency key (swipe pair, client message id). Anything else fails the test.
TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
             grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED}
# Fast reconnects after the gateway comes back (grpcio's default backoff grows to minutes).
CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 500)]
# Access tokens live 15 minutes: a member signs in again when its token is older than this (a soak runs longer).
TOKEN_RENEW_S = 600


def channel_to(address):
    return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)


class Member:
    def __init__(self, cluster, channel, community, index):
        accounts = account_pb2_grpc.AccountServiceStub(channel)
        self.email, username = f"{unique('f-')}@example.com", unique("f_")
        self.community, self.gateway, self.index = community, cluster.gateway, index
        sign_up_and_verify(cluster, accounts, community, self.email, username)
        self._lock = threading.Lock()
        self._signed_at = 0.0
        self._sign_in(accounts)

    def _sign_in(self, accounts):
        signed = accounts.SignIn(account_pb2.SignInRequest(community_id=self.community, login=self.email,
                                                           password=PASSWORD), timeout=TIMEOUT)
        self.id, self._auth = signed.account.user_id, bearer(signed.tokens.access_token)
        self._signed_at = time.monotonic()

    @property
    def auth(self):
        """The bearer metadata of a current access token: signed in again once it is TOKEN_RENEW_S old (if auth
        cannot answer just then, the old token, still valid for a while, is used and the next call tries again)."""
        with self._lock:
            if time.monotonic() - self._signed_at > TOKEN_RENEW_S:
                try:
                    with channel_to(self.gateway) as channel:
                        self._sign_in(account_pb2_grpc.AccountServiceStub(channel))
                except grpc.RpcError as error:
                    if error.code() not in TRANSIENT:
                        raise
            return self._auth

    def create_profile(self, channel):
        profiles = profile_pb2_grpc.ProfileServiceStub(channel)
        profiles.CreateProfile(profile_pb2.CreateProfileRequest(
            fields=types_pb2.ProfileFields(display_name=f"Member {self.index}",
                                           birth_date=common_pb2.CalendarDate(year=1990, month=5, day=1)),
            idempotency_key=str(uuid.uuid4())), metadata=self.auth, timeout=TIMEOUT)
        profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(location=common_pb2.GeoPoint(
            latitude_deg=52.52 + self.index * 0.002, longitude_deg=13.40)), metadata=self.auth, timeout=TIMEOUT)


def mutual_community(cluster, channel) -> str:
    """A community of the caller's own: mutual likes, no photos needed, limits the run cannot reach."""
    community = unique("faults-")
    accounts = account_pb2_grpc.AccountServiceStub(channel)
    admin_api = admin_pb2_grpc.AdminServiceStub(channel)
    email = f"{unique('admin-')}@example.com"
    sign_up_and_verify(cluster, accounts, community, email, unique("admin_"))
    admin_api.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET,
                                                             community_id=community, login=email), timeout=TIMEOUT)
    admin = bearer(accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email,
                                                             password=PASSWORD), timeout=TIMEOUT).tokens.access_token)
    settings = community_pb2.CommunitySettings(mode=common_pb2.COMMUNITY_MODE_MUTUAL, daily_like_limit=10_000,
                                               hourly_message_limit=10_000, default_radius_km=50)
    admin_api.CreateCommunity(admin_pb2.CreateCommunityRequest(community_id=community, display_name="Faults",
                                                               settings=settings), metadata=admin, timeout=TIMEOUT)
    admin_api.UpdateCommunity(admin_pb2.UpdateCommunityRequest(
        community_id=community, settings=community_pb2.CommunitySettings(min_photos=0),
        update_paths=["settings.min_photos"]), metadata=admin, timeout=TIMEOUT)
    return community


def wait_for(what, check, timeout=60.0, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except (grpc.RpcError, RuntimeError):
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def members_with_profiles(cluster, count):
    """A mutual community and `count` members with profiles and locations, once match and discovery know them."""
    with channel_to(cluster.gateway) as setup:
        # Connected first, with a generous bound: on a loaded machine the first connection to a gateway that has just
        # started can take longer than one call's deadline.
        grpc.channel_ready_future(setup).result(timeout=120)
        community = mutual_community(cluster, setup)
        members = [Member(cluster, setup, community, index) for index in range(count)]
        for member in members:
            member.create_profile(setup)
    ids = ", ".join(f"'{m.id}'" for m in members)
    # Profile's events reach match and discovery (relays): wait until both know every member.
    wait_for("match's and discovery's member projections", lambda: cluster.psql(
        f"SELECT count(*) FROM match.members WHERE eligible AND user_id IN ({ids})") == str(count)
        and cluster.psql(f"SELECT count(*) FROM discovery.candidates WHERE user_id IN ({ids})") == str(count))
    return community, members


class SwipePlan:
    """Partners (2k, 2k+1) match first (so every stream has a resume token before the faults); partners (i, i+2
    within each block of four) match later; every member also passes or likes `others` more, never reciprocated."""

    def __init__(self, count, others=5, seed=14):
        self.first_pairs = [(i, i + 1) for i in range(0, count, 2)]
        second_pairs = [(i, i + 2) for i in range(0, count, 4)] + [(i + 1, i + 3) for i in range(0, count, 4)]
        rng = random.Random(seed)
        partners = {i: set() for i in range(count)}
        for a, b in self.first_pairs + second_pairs:
            partners[a].add(b)
            partners[b].add(a)
        plan = [(a, b, LIKE) for a, b in second_pairs] + [(b, a, LIKE) for a, b in second_pairs]
        for swiper in range(count):
            others_of = [t for t in range(count) if t != swiper and t not in partners[swiper]]
            for target in rng.sample(others_of, others):
                plan.append((swiper, target, rng.choice((LIKE, PASS))))
        rng.shuffle(plan)
        # One-sided likes never make a match; drop those that happen to be reciprocated by the random part.
        planned = {(s, t): action for s, t, action in plan}
        self.later = [(s, t, a) for s, t, a in plan
                      if not (a == LIKE and planned.get((t, s)) == LIKE and t not in partners[s])]
        self.expected_pairs = {frozenset(p) for p in self.first_pairs + second_pairs}


class Driver:
    """The load: swipes from a plan, messages in every matched pair, deck fetches and one Subscribe stream per
    member, every call retried on transient errors with the same idempotency key and recorded once
    acknowledged. Every retry and stream break is kept with its wall-clock time (`transient`)."""

    def __init__(self, gateway, members, message_pause=0.05, channel=None, swipe_timeout=5.0):
        """`channel`: the app's own (over several gateways, say); by default one to `gateway`. `swipe_timeout`: each
        Swipe's deadline, seconds (a swipe that makes a match waits for chat and profile to apply it, up to the
        cluster's KINDRED_MATCH_MATCH_PROPAGATION_MS)."""
        self.gateway, self.members, self.message_pause = gateway, members, message_pause
        self.swipe_timeout = swipe_timeout
        self.channel = channel or channel_to(gateway)
        self.deck = deck_pb2_grpc.DeckServiceStub(self.channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(self.channel)
        self.lock = threading.Lock()
        self.stop_sending = threading.Event()
        self.stop_streams = threading.Event()
        self.swipes = {}  # (swiper index, target index) -> (action, outcome, match id)
        self.matches = {}  # frozenset of the two indexes -> match id (thread id)
        self.messages = {}  # thread id -> {client message id: message id}
        self.received = {member.index: [] for member in members}  # message ids on each member's streams
        self.stream_tokens = {member.index: "" for member in members}
        self.resubscribes = 0
        self.retries = {}  # status code name -> count
        self.transient = []  # (time.time(), what, "CODE (details)") of every retry and broken stream
        self.failures = []  # unexpected errors
        self.deck_answers = 0
        self.threads = []
        self.senders = {}
        self.decks = None  # the deck fetcher thread, once started

    def start(self, name, target, *args):
        thread = threading.Thread(target=self._guarded, args=(target, *args), name=name, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread

    def _guarded(self, target, *args):
        try:
            target(*args)
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.failures.append(f"{threading.current_thread().name}: {error!r}")

    def progress(self, amount, what, timeout=90):
        """Waits until `amount` more calls are acknowledged (`what` names the moment), failing on any failed call."""
        base = self.acknowledged()
        wait_for(f"{amount} more acknowledged calls ({what})", lambda: self.acknowledged() >= base + amount
                 or self.failures, timeout=timeout, interval=0.05)
        assert not self.failures, self.failures

    def acknowledged(self):
        with self.lock:
            return len(self.swipes) + sum(len(m) for m in self.messages.values())

    def _transient(self, what, error):
        code = error.code()
        with self.lock:
            self.retries[code.name] = self.retries.get(code.name, 0) + 1
            self.transient.append((time.time(), what, f"{code.name} ({error.details()})"))

    def call(self, what, function, deadline_s=90.0):
        """function() until it succeeds, retrying transient errors; any other error is a failure."""
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                return function()
            except grpc.RpcError as error:
                if error.code() not in TRANSIENT or time.monotonic() > deadline:
                    raise AssertionError(f"{what}: {error.code()} {error.details()}") from None
                self._transient(what, error)
                time.sleep(0.1)

    # --- swipes -------------------------------------------------------------------------------------------
    def swipe(self, swiper, target, action):
        member = self.members[swiper]
        request = deck_pb2.SwipeRequest(target_user_id=self.members[target].id, action=action, surface="deck")
        answer = self.call("Swipe", lambda: self.deck.Swipe(request, metadata=member.auth,
                                                             timeout=self.swipe_timeout))
        match_id = answer.match.match_id if answer.outcome == deck_pb2.SWIPE_OUTCOME_MATCHED else ""
        with self.lock:
            self.swipes[(swiper, target)] = (action, answer.outcome, match_id)
            if match_id:
                pair = frozenset((swiper, target))
                assert self.matches.setdefault(pair, match_id) == match_id, "two matches for one pair"
        if match_id:
            self.start_sender(swiper, target, match_id)
        return answer

    def swipe_all(self, plan, pause):
        for swiper, target, action in plan:
            if self.stop_sending.is_set():
                return
            self.swipe(swiper, target, action)
            time.sleep(pause)

    # --- messages -----------------------------------------------------------------------------------------
    def start_sender(self, first, second, thread_id):
        with self.lock:
            if thread_id in self.senders:
                return
            self.messages[thread_id] = {}
            self.senders[thread_id] = self.start(f"sender-{thread_id[:8]}", self.send_messages, first, second,
                                                 thread_id)

    def send_messages(self, first, second, thread_id):
        people = (self.members[first], self.members[second])
        # The thread opens when match's MatchCreated reaches chat (the relay): wait until chat has it.
        wait_for(f"thread {thread_id} in chat", lambda: thread_id in [
            t.thread_id for t in self.chat.ListThreads(chat_pb2.ListThreadsRequest(), metadata=people[0].auth,
                                                       timeout=5).threads], timeout=90)
        number = 0
        while not self.stop_sending.is_set():
            sender = people[number % 2]
            client_id = f"{thread_id}-{number}"
            request = chat_pb2.SendMessageRequest(thread_id=thread_id, client_message_id=client_id,
                                                  body=f"message {number}")
            answer = self.call("SendMessage", lambda: self.chat.SendMessage(request, metadata=sender.auth, timeout=5))
            with self.lock:
                self.messages[thread_id][client_id] = answer.message.message_id
            number += 1
            time.sleep(self.message_pause)

    # --- streams and decks ----------------------------------------------------------------------------------
    def subscribe(self, member):
        """Member's Subscribe stream, resumed from its last token whenever it breaks."""
        while not self.stop_streams.is_set():
            try:
                call = self.chat.Subscribe(chat_pb2.SubscribeRequest(resume_token=self.stream_tokens[member.index]),
                                           metadata=member.auth, timeout=600)
                for event in call:
                    if event.resume_token:
                        self.stream_tokens[member.index] = event.resume_token
                    kind = event.WhichOneof("event")
                    if kind == "message":
                        self.received[member.index].append(event.message.message_id)
                    elif kind == "resync_required":
                        raise AssertionError(f"member {member.index}: resync required after a resume")
                    if self.stop_streams.is_set():
                        call.cancel()
                        return
            except grpc.RpcError as error:
                if error.code() not in TRANSIENT:
                    raise AssertionError(f"Subscribe: {error.code()} {error.details()}") from None
                if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:  # the stream's own 600 s deadline
                    self._transient("Subscribe", error)
            with self.lock:
                self.resubscribes += 1
            time.sleep(0.2)

    def fetch_decks(self):
        while not self.stop_sending.is_set():
            for member in self.members:
                if self.stop_sending.is_set():
                    return
                try:
                    self.deck.GetDeck(deck_pb2.GetDeckRequest(page_size=20), metadata=member.auth, timeout=5)
                    with self.lock:
                        self.deck_answers += 1
                except grpc.RpcError as error:
                    if error.code() not in TRANSIENT:
                        raise AssertionError(f"GetDeck: {error.code()} {error.details()}") from None
                    self._transient("GetDeck", error)
                time.sleep(0.1)

    def start_load(self, plan: SwipePlan, swipe_pause):
        """Streams for every member, the first pairs matched, then deck fetches and the later swipes (one every
        `swipe_pause` seconds) in the background; returns the swiper thread."""
        for member in self.members:
            self.start(f"subscriber-{member.index}", self.subscribe, member)
        time.sleep(1.0)
        for a, b in plan.first_pairs:
            self.swipe(a, b, LIKE)
            assert self.swipe(b, a, LIKE).outcome == deck_pb2.SWIPE_OUTCOME_MATCHED
        wait_for("a resume token on every stream", lambda: all(self.stream_tokens.values()), timeout=60)
        self.decks = self.start("decks", self.fetch_decks)
        return self.start("swiper", self.swipe_all, plan.later, swipe_pause)

    def stop_load(self):
        self.stop_sending.set()
        # Nothing of the driver's may call once the load is stopped: the cluster may be stopping.
        for thread in [*self.senders.values(), *([self.decks] if self.decks else [])]:
            thread.join(60)
        assert not self.failures, self.failures


# --- faults --------------------------------------------------------------------------------------------------
def process_environment(pid: int) -> dict:
    raw = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def children_of(pid: int) -> list:
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def healthy(name: str, pid: int) -> bool:
    """The server's own healthcheck subcommand, with the environment run-cluster.sh gave it (`name` may be an
    instance: chat.2 is a chat-server, discovery_2 a discovery-server)."""
    server = name.split(".")[0].split("_")[0]
    result = subprocess.run([str(bin_dir() / f"{server}-server"), "healthcheck"], env=process_environment(pid),
                            capture_output=True, timeout=30)
    return result.returncode == 0


def kill_server(cluster, name):
    """kill -9 of one server; returns once run-cluster.sh has started it again and it answers its healthcheck."""
    old = cluster.pids()[name]
    os.kill(old, signal.SIGKILL)
    new = wait_for(f"{name} restarted", lambda: cluster.pids()[name] != old and cluster.pids()[name], timeout=30)
    wait_for(f"{name} healthy again", lambda: healthy(name, new), timeout=60)


def kill_postgres(cluster):
    """The postmaster and every backend at once (as a crash would); returns once run-cluster.sh has started it
    again (crash recovery). The servers reconnect on their own."""
    postmaster = cluster.pids()["postgres"]
    backends = children_of(postmaster)
    os.kill(postmaster, signal.SIGKILL)
    for pid in backends:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_for("postgres restarted", lambda: cluster.pids()["postgres"] != postmaster, timeout=60)
    wait_for("postgres answering", lambda: cluster.psql("SELECT 1") == "1", timeout=60)


# --- the check afterwards --------------------------------------------------------------------------------------
EVENT_PRODUCERS = ("auth", "profile", "match", "chat")


def consumers_of(cluster, producers=EVENT_PRODUCERS) -> dict:
    """consumer -> which of `producers` it follows (cluster.env's KINDRED_EVENT_CONSUMERS_OF_<PRODUCER>), each
    discovery shard of the cluster following what discovery follows."""
    shards = [name for name in cluster.discovery_shards() if name != "discovery"]
    follows = {}
    for producer in producers:
        consumers = CLUSTER[f"KINDRED_EVENT_CONSUMERS_OF_{producer.upper()}"].split()
        for consumer in consumers + (shards if "discovery" in consumers else []):
            follows.setdefault(consumer, []).append(producer)
    return follows


# consumer -> producer -> the event types it applies: the service kit's EventSubscriptions, which the push relay sends
# a consumer alone (events_consumers.event_types: `registered_subscriptions_agree` checks the two agree) and which
# consumers on NATS JetStream acknowledge without recording the others in their inbox. Not named: every type.
_CHAT_TYPES = {"match.created", "match.ended", "user.blocked", "account.deactivated", "account.reactivated",
               "account.deleted", "community.updated"}
_MATCH_TYPES = {"account.deactivated", "account.reactivated", "account.deleted", "profile.updated",
                "profile.location_changed", "community.updated"}
SUBSCRIPTIONS = {
    "auth": {"profile": {"community.updated"}},
    "chat": {producer: _CHAT_TYPES for producer in ("auth", "profile", "match")},
    "match": {producer: _MATCH_TYPES for producer in ("auth", "profile")},
    "profile": {"auth": {"account.deactivated", "account.reactivated", "account.deleted"},
                "match": {"account.deleted", "user.blocked", "user.unblocked", "match.created", "match.ended"}},
}


def applied_types(consumer, producer):
    """The event types `consumer` applies from `producer` (SUBSCRIPTIONS); None for every type."""
    return SUBSCRIPTIONS[consumer].get(producer, set()) if consumer in SUBSCRIPTIONS else None


def registered_subscriptions_agree(cluster, producer) -> bool:
    """The types the push relay of `producer` registered for each consumer (events_consumers.event_types) are
    SUBSCRIPTIONS' (NULL, every type, for a consumer not named there and the bus's publisher)."""
    for line in cluster.psql(f"SELECT consumer, COALESCE(array_to_string(event_types, ',', ''), '*') "
                             f"FROM {producer}.events_consumers").splitlines():
        consumer, types = line.split("|")
        expected = applied_types(consumer, producer)
        if (None if types == "*" else set(filter(None, types.split(",")))) != expected:
            raise AssertionError(f"{producer} registered {consumer} for {types}, SUBSCRIPTIONS says {expected}")
    return True


def outbox_event_ids(cluster, producer, types=None) -> set:
    """The ids of the events in `producer`'s outbox, of `types` only when given."""
    only = "" if types is None else " WHERE event_type IN (" + ",".join(f"'{t}'" for t in sorted(types) or ["-"]) + ")"
    return set(cluster.psql(f"SELECT event_id FROM {producer}.events_outbox{only}").split())


def everything_delivered(cluster, follows=None) -> bool:
    """On NATS JetStream: the relays published everything (their JetStream cursors) and every consumer's inbox
    holds every event of the producers it follows (`follows`: consumer -> producers; by default cluster.env's, every
    discovery shard included) that is still in their outboxes and of a type it applies (SUBSCRIPTIONS)."""
    follows = follows or consumers_of(cluster)
    producers = sorted({producer for followed in follows.values() for producer in followed})
    pending = sum(int(cluster.psql(f"SELECT count(*) FROM {producer}.events_cursors WHERE consumer = 'jetstream' "
                                   "AND acknowledged_sequence < appended_sequence")) for producer in producers)
    if pending:
        return False
    for consumer, followed in follows.items():
        for producer in followed:
            applied = set(cluster.psql(f"SELECT event_id FROM {consumer}.events_inbox "
                                       f"WHERE producer = '{producer}'").split())
            if not outbox_event_ids(cluster, producer, applied_types(consumer, producer)) <= applied:
                return False
    return True


def all_events_delivered(cluster, producers=("auth", "profile", "match")) -> bool:
    """Every event of `producers` reached its consumers. With the push relay: no outbox cursor is behind. On NATS
    JetStream, where those cursors stay unused: `everything_delivered` for the consumers of `producers`."""
    if cluster.on_nats:
        return everything_delivered(cluster, consumers_of(cluster, producers))
    pending = sum(int(cluster.psql(f"SELECT count(*) FROM {schema}.events_cursors "
                                   "WHERE acknowledged_sequence < appended_sequence"))
                  for schema in producers)
    return pending == 0 and all(registered_subscriptions_agree(cluster, schema) for schema in producers)


def check_nothing_lost(cluster, driver: Driver, community: str, plan: SwipePlan, events_delivered=None) -> dict:
    """Every acknowledged swipe, match and message stored exactly once, every event delivered (`events_delivered`,
    by default `all_events_delivered`), decks settled and every resumed stream complete; returns the figures
    (AssertionError on the first rule broken)."""
    members = driver.members
    stored_swipes = cluster.psql(f"SELECT swiper, target, action, outcome, coalesce(match_id::text, '') "
                                 f"FROM match.swipes WHERE community_id = '{community}'").splitlines()
    by_pair = {}
    index_of = {m.id: m.index for m in members}
    for row in stored_swipes:
        s, t, action, outcome, match_id = row.split("|")
        key = (index_of[s], index_of[t])
        assert key not in by_pair, f"swipe {key} stored twice"
        by_pair[key] = (int(action), int(outcome), match_id)
    assert by_pair == driver.swipes, "stored swipes differ from the acknowledged ones"
    stored_matches = cluster.psql(f"SELECT user_low, user_high, match_id FROM match.matches "
                                  f"WHERE community_id = '{community}' AND ended_at IS NULL").splitlines()
    pairs = [frozenset((index_of[low], index_of[high])) for low, high, _ in (r.split("|") for r in stored_matches)]
    assert len(pairs) == len(set(pairs)) == len(plan.expected_pairs) and set(pairs) == plan.expected_pairs
    assert {frozenset(p): m for p, m in zip(pairs, (r.split("|")[2] for r in stored_matches))} == driver.matches
    message_rows = cluster.psql("SELECT thread_id, client_message_id, message_id, sequence FROM chat.messages "
                                f"WHERE thread_id IN ({', '.join(repr(t) for t in driver.messages)})").splitlines()
    stored_messages = {}
    duplicates = 0
    for row in message_rows:
        thread_id, client_id, message_id, sequence = row.split("|")
        if client_id in stored_messages.setdefault(thread_id, {}):
            duplicates += 1
        stored_messages[thread_id][client_id] = message_id
    acknowledged_messages = sum(len(m) for m in driver.messages.values())
    assert duplicates == 0, f"{duplicates} messages stored twice"
    assert len(message_rows) == acknowledged_messages, \
        f"{acknowledged_messages} messages acknowledged, {len(message_rows)} stored"
    assert stored_messages == {t: m for t, m in driver.messages.items() if m}
    for thread_id in driver.messages:  # per thread, sequences 1..n without gaps
        sequences = sorted(int(r.split("|")[3]) for r in message_rows if r.startswith(thread_id))
        assert sequences == list(range(1, len(sequences) + 1)), f"thread {thread_id}: sequence gaps"

    # Every event reached its consumers: outbox cursors caught up; discovery holds every swipe, chat every match.
    wait_for("every event delivered", events_delivered or (lambda: all_events_delivered(cluster)),
             timeout=90, interval=0.5)
    discovery_swipes = cluster.psql(f"SELECT count(*), count(DISTINCT swipe_id) FROM discovery.swipes "
                                    f"WHERE community_id = '{community}'")
    assert discovery_swipes == f"{len(driver.swipes)}|{len(driver.swipes)}", discovery_swipes
    chat_threads = set(cluster.psql(f"SELECT thread_id FROM chat.threads WHERE community_id = '{community}'")
                       .splitlines())
    assert chat_threads == set(driver.matches.values())

    # Decks recover: every member's deck answers, with nobody the member swiped on.
    deck = driver.deck
    for member in members:
        def deck_settled(member=member):
            cards = [c.profile.user_id for c in deck.GetDeck(deck_pb2.GetDeckRequest(page_size=50),
                                                                metadata=member.auth, timeout=10).cards]
            swiped = {members[t].id for (s, t) in driver.swipes if s == member.index}
            return cards and not swiped & set(cards)
        wait_for(f"member {member.index}'s deck", deck_settled, timeout=30)

    # Subscriptions recover: each member's resumed stream saw each message of its threads exactly once (its
    # own too: "from another device").
    expected = {m.index: set() for m in members}
    for pair, thread_id in driver.matches.items():
        for index in pair:
            expected[index] |= set(driver.messages[thread_id].values())
    wait_for("every message on its streams", lambda: all(
        set(driver.received[i]) >= expected[i] for i in expected), timeout=60, interval=0.5)
    driver.stop_streams.set()
    stream_duplicates = sum(len(r) - len(set(r)) for r in driver.received.values())
    assert stream_duplicates == 0, "a resumed subscriber received a message twice"
    assert all(set(driver.received[i]) == expected[i] for i in expected), "a subscriber saw a foreign message"
    assert not driver.failures, driver.failures
    return {"swipes acknowledged": len(driver.swipes), "swipes found": len(by_pair),
            "matches expected": len(plan.expected_pairs), "matches found": len(pairs),
            "messages acknowledged": acknowledged_messages, "messages found": len(message_rows),
            "message duplicates": duplicates,
            "stream deliveries": sum(len(r) for r in driver.received.values()),
            "stream duplicates": stream_duplicates, "resubscribes": driver.resubscribes,
            "deck answers": driver.deck_answers, "retried": dict(driver.retries)}
