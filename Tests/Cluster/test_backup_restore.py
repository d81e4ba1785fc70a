"""A backup restores to a point in time (services/backup.sh, services/restore.sh). A load runs through the gateway
of a cluster (swipes with matches, chat messages, deck fetches, live Subscribe streams, photo uploads into the
folder store) while services/backup.sh takes a base backup; the load goes on, the test notes a time T, the load
goes on again; then the cluster is stopped (the machine is lost) and services/restore.sh restores the backup and
the archived WAL to T into a new folder, where services/run-cluster.sh starts the services. Checked on the
restored cluster: every swipe, match, message, photo and account acknowledged before T is there exactly once,
nothing sent after T is, and events, decks and chat streams recover without a manual step (every event reaches
its consumers, decks answer, a new match opens its chat thread through the relay, a fresh Subscribe and one resumed with a
token from before T receive the new message). Also: a restore to a time the WAL archive does not reach is refused
rather than silently restoring less.

Notify is stopped (SIGSTOP) from a while before T until after it, so events are in flight at T: written and, on NATS
JetStream, published, but not applied by notify. The restored cluster must deliver them: the push relay from its
restored cursors; on NATS (KINDRED_TEST_SCALE_OUT=1), where the restored cluster starts on empty streams, the relays
find a stream other than the one their cursors refer to and publish their outboxes again.

Run on one PostgreSQL server and on two (run-cluster.sh --databases 2: auth, profile, discovery on the first; match,
chat, notify on the second), backed up together and restored to the same T: the events between services on
different servers (a swipe in match reaching discovery, a match opening chat's thread) recover as on one server:
what the producer had recorded as acknowledged at T, the consumer had committed before T, and what was in flight
at T is delivered again from the producer's outbox."""
import asyncio
import datetime
import hashlib
import io
import os
import pathlib
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid

import grpc
import nats
import pytest
from PIL import Image

from cluster_harness import ROOT, Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, unique
from acknowledged_writes import (BOOTSTRAP_SECRET, EVENT_PRODUCERS, LIKE, PASS, TRANSIENT, Member,
                                 all_events_delivered, channel_to, mutual_community, wait_for)

from kindred.api.v1 import (account_pb2, account_pb2_grpc, chat_pb2, chat_pb2_grpc, deck_pb2,  # noqa: E402
                            deck_pb2_grpc, profile_pb2, profile_pb2_grpc)
from kindred.common.v1 import common_pb2  # noqa: E402

MEMBERS = 12
SETTINGS = dict(KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET, KINDRED_CHAT_HEARTBEAT_MS="1000",
                KINDRED_MATCH_SWIPE_RATE="100000", KINDRED_MATCH_SWIPE_BURST="100000")


def utc(moment: float) -> str:
    """A PostgreSQL timestamp of a Unix time, in UTC to the microsecond."""
    return datetime.datetime.fromtimestamp(moment, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def photo(seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (640, 800), (seed % 256, 90, 150)).save(out, "JPEG", quality=85)
    return out.getvalue()


def upload(channel, member, data: bytes):
    def messages():
        yield profile_pb2.UploadPhotoRequest(header=profile_pb2.PhotoUploadHeader(
            content_type="image/jpeg", total_size_bytes=len(data), sha256=hashlib.sha256(data).digest(),
            position=99, idempotency_key=str(uuid.uuid4())))
        yield profile_pb2.UploadPhotoRequest(chunk=data)
    return profile_pb2_grpc.ProfileServiceStub(channel).UploadPhoto(messages(), metadata=member.auth,
                                                                   timeout=60).photo.photo_id


class Writes:
    """The load, recording for every write when it was sent and when it was acknowledged (Unix time): swipes from
    a plan, messages in every matched pair, deck fetches and one Subscribe stream per member, each call retried
    with its idempotency key on transient errors."""

    def __init__(self, gateway, members):
        self.members = members
        self.channel = channel_to(gateway)
        self.deck = deck_pb2_grpc.DeckServiceStub(self.channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(self.channel)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.swipes = {}  # (swiper index, target index) -> (sent, acknowledged, action, outcome, match id)
        self.matches = {}  # frozenset of indexes -> (sent, acknowledged, match id)
        self.messages = {}  # thread id -> {client message id: (sent, acknowledged, message id)}
        self.tokens = {member.index: "" for member in members}  # the last resume token of each stream
        self.failures = []
        self.threads = []

    def start(self, target, *args):
        def guarded():
            try:
                target(*args)
            except Exception as error:  # noqa: BLE001 - reported by the test
                self.failures.append(repr(error))
        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread

    def count(self):
        with self.lock:
            return len(self.swipes) + sum(len(m) for m in self.messages.values())

    def progress(self, amount):
        target = self.count() + amount
        wait_for(f"{amount} more acknowledged writes", lambda: self.count() >= target or self.failures, timeout=120)
        assert not self.failures, self.failures

    def call(self, what, function):
        deadline = time.monotonic() + 60
        while True:
            try:
                return function()
            except grpc.RpcError as error:
                if error.code() not in TRANSIENT or time.monotonic() > deadline:
                    raise AssertionError(f"{what}: {error.code()} {error.details()}") from None
                time.sleep(0.1)

    def swipe(self, swiper, target, action):
        request = deck_pb2.SwipeRequest(target_user_id=self.members[target].id, action=action, surface="deck")
        sent = time.time()
        answer = self.call("Swipe", lambda: self.deck.Swipe(request, metadata=self.members[swiper].auth, timeout=10))
        acknowledged = time.time()
        match_id = answer.match.match_id if answer.outcome == deck_pb2.SWIPE_OUTCOME_MATCHED else ""
        with self.lock:
            self.swipes[(swiper, target)] = (sent, acknowledged, action, answer.outcome, match_id)
            if match_id:
                self.matches[frozenset((swiper, target))] = (sent, acknowledged, match_id)
                self.messages[match_id] = {}
        if match_id:
            self.start(self.send_messages, swiper, target, match_id)
        return answer

    def swipe_all(self, phases, gates, done):
        """Each phase's swipes once its gate opens (before the backup, between the backup and T, after T)."""
        for plan, gate, finished in zip(phases, gates, done):
            while not gate.wait(0.1):
                if self.stop.is_set():
                    return
            for swiper, target, action in plan:
                if self.stop.is_set():
                    return
                self.swipe(swiper, target, action)
                time.sleep(0.05)
            finished.set()

    def send_messages(self, first, second, thread_id):
        people = (self.members[first], self.members[second])
        wait_for(f"thread {thread_id} in chat", lambda: thread_id in [t.thread_id for t in self.chat.ListThreads(
            chat_pb2.ListThreadsRequest(), metadata=people[0].auth, timeout=10).threads], timeout=60)
        number = 0
        while not self.stop.is_set():
            client_id = f"{thread_id}-{number}"
            request = chat_pb2.SendMessageRequest(thread_id=thread_id, client_message_id=client_id, body=f"m{number}")
            sent = time.time()
            answer = self.call("SendMessage", lambda: self.chat.SendMessage(request, metadata=people[number % 2].auth,
                                                                            timeout=10))
            with self.lock:
                self.messages[thread_id][client_id] = (sent, time.time(), answer.message.message_id)
            number += 1
            time.sleep(0.1)

    def subscribe(self, member):
        while not self.stop.is_set():
            try:
                call = self.chat.Subscribe(chat_pb2.SubscribeRequest(resume_token=self.tokens[member.index]),
                                           metadata=member.auth, timeout=600)
                for event in call:
                    if event.resume_token:
                        self.tokens[member.index] = event.resume_token
                    if self.stop.is_set():
                        call.cancel()
                        return
            except grpc.RpcError as error:
                if error.code() not in TRANSIENT:
                    raise AssertionError(f"Subscribe: {error.code()} {error.details()}") from None
            time.sleep(0.2)

    def fetch_decks(self):
        while not self.stop.is_set():
            for member in self.members:
                self.call("GetDeck", lambda: self.deck.GetDeck(deck_pb2.GetDeckRequest(page_size=20),
                                                               metadata=member.auth, timeout=10))
                time.sleep(0.2)

    def finish(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        assert not self.failures, self.failures


def archive_everything(cluster):
    """Closes the current WAL segment of every server and waits until its archiver has it (on a lost machine, what
    the last archive_timeout had not closed yet is lost with it)."""
    for _, _, services in cluster.databases():
        server = services[0] if isinstance(services, list) else None
        segment = cluster.psql("SELECT pg_walfile_name(pg_switch_wal())", server=server)
        wait_for(f"WAL segment {segment} archived", lambda: cluster.psql(
            "SELECT last_archived_wal FROM pg_stat_archiver", server=server) >= segment, timeout=60)


def run(*command, env=None):
    started = time.monotonic()
    result = subprocess.run([str(arg) for arg in command], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    return result, time.monotonic() - started


@pytest.fixture(scope="module")
def workspace():
    folder = pathlib.Path(tempfile.mkdtemp(prefix="kindred-restore-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("databases", ["1", "2"], ids=["one-server", "two-servers"])
def test_a_backup_restores_to_a_point_in_time_and_the_services_carry_on(workspace, databases):
    workspace = workspace / f"databases-{databases}"
    workspace.mkdir()
    photos = workspace / "photos"
    backups = workspace / "backups"
    source = Cluster(KINDRED_PROFILE_PHOTO_DIR=str(photos), KINDRED_DATABASES=databases, **SETTINGS)
    backup_env = dict(source.env)
    try:
        with channel_to(source.gateway) as setup:
            community = mutual_community(source, setup)
            members = [Member(source, setup, community, index) for index in range(MEMBERS)]
            for member in members:
                member.create_profile(setup)
            photo_before_backup = upload(setup, members[0], photo(1))
        ids = ", ".join(f"'{m.id}'" for m in members)
        wait_for("match's and discovery's member projections", lambda: source.psql(
            f"SELECT count(*) FROM match.members WHERE eligible AND user_id IN ({ids})") == str(MEMBERS)
            and source.psql(f"SELECT count(*) FROM discovery.candidates WHERE user_id IN ({ids})") == str(MEMBERS))

        # Pairs (2k, 2k+1) match first, so threads carry messages through the backup; later pairs (i, i+2 in each
        # block of four) match during the run; everyone also likes or passes a few others. Members 0 and 3 never
        # swipe on each other: they match on the restored cluster.
        writes = Writes(source.gateway, members)
        for member in members:
            writes.start(writes.subscribe, member)
        for a in range(0, MEMBERS, 2):
            writes.swipe(a, a + 1, LIKE)
            assert writes.swipe(a + 1, a, LIKE).outcome == deck_pb2.SWIPE_OUTCOME_MATCHED
        rng = random.Random(28)
        later = [(i, i + 2) for i in range(0, MEMBERS, 4)] + [(i + 1, i + 3) for i in range(0, MEMBERS, 4)]
        plan = [(a, b, LIKE) for a, b in later] + [(b, a, LIKE) for a, b in later]
        taken = {frozenset((a, a + 1)) for a in range(0, MEMBERS, 2)} | {frozenset(p) for p in later}
        taken.add(frozenset((0, 3)))
        for swiper in range(MEMBERS):
            others = [t for t in range(MEMBERS) if t != swiper and frozenset((swiper, t)) not in taken]
            plan += [(swiper, t, PASS) for t in rng.sample(others, 3)]  # passes never match
        rng.shuffle(plan)
        writes.start(writes.fetch_decks)
        phases = [plan[i::3] for i in range(3)]
        gates = [threading.Event() for _ in phases]
        done = [threading.Event() for _ in phases]
        gates[0].set()
        writes.start(writes.swipe_all, phases, gates, done)
        wait_for("a resume token on every stream", lambda: all(writes.tokens.values()), timeout=60)
        writes.progress(30)

        # The base backup, while the writes go on.
        result, backup_seconds = run(ROOT / "services" / "backup.sh", "--to", backups, env=backup_env)
        assert result.returncode == 0, result.stdout + result.stderr
        backed_up = next(line for line in result.stdout.splitlines() if line.startswith("Backed up"))
        gates[1].set()
        wait_for("the swipes between the backup and T", lambda: done[1].is_set() or writes.failures, timeout=120)
        with channel_to(source.gateway) as channel:
            photo_before_t = upload(channel, members[1], photo(2))
        # Notify stops applying events (SIGSTOP of each notify process) from a while before T until after it: what
        # chat (the messages) published for it meanwhile is still unapplied at T, so the restored cluster must deliver
        # it from the restored outboxes (the push relay's cursors; on NATS, the relays publish their outboxes again
        # into the new, empty streams).
        notify = [pid for name, pid in source.pids().items() if name.split(".")[0] == "notify"]
        for pid in notify:
            os.kill(pid, signal.SIGSTOP)
        try:
            writes.progress(20)
            tokens_before_t = dict(writes.tokens)
            moment = time.time()  # T
            gates[2].set()
            writes.progress(40)
        finally:
            for pid in notify:
                os.kill(pid, signal.SIGCONT)
        with channel_to(source.gateway) as channel:
            photo_after_t = upload(channel, members[2], photo(3))
            late_email = f"{unique('late-')}@example.com"
            account_pb2_grpc.AccountServiceStub(channel).SignUp(account_pb2.SignUpRequest(
                community_id=community, email=late_email, username=unique("late_"), password=PASSWORD),
                timeout=TIMEOUT)
        wait_for("the swipes after T", lambda: done[2].is_set() or writes.failures, timeout=120)
        writes.progress(20)
        writes.finish()
        # The continuous parts of a backup: the WAL archive, and the photo files copied every few minutes.
        archive_everything(source)
        result, _ = run(ROOT / "services" / "backup.sh", "--to", backups, "--photos-only", env=backup_env)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        # The machine is lost.
        assert_clean_stop(source, source.pids(), keep_folder=True)

    # A time the archive does not reach is refused, and leaves nothing that could be started by mistake.
    empty_archive = workspace / "empty-archive"
    empty_archive.mkdir()
    if databases == "2":
        (workspace / "empty-archive-2").mkdir()  # the second server's (run-cluster.sh's naming)
    refused, _ = run(ROOT / "services" / "restore.sh", "--from", backups, "--to-data", workspace / "refused",
                     "--target-time", utc(moment), "--wal-archive", empty_archive)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "recovery ended before configured recovery target was reached" in refused.stderr, refused.stderr
    assert not (workspace / "refused" / "postgres").exists() and not (workspace / "refused" / "postgres-2").exists()

    restored_folder = workspace / "restored"
    restored_folder.mkdir()
    restored_photos = restored_folder / "photos"
    result, restore_seconds = run(ROOT / "services" / "restore.sh", "--from", backups, "--to-data",
                                  restored_folder / "data", "--target-time", utc(moment),
                                  "--wal-archive", source.data_dir / "wal-archive", "--photo-dir", restored_photos)
    assert result.returncode == 0, result.stdout + result.stderr
    restored_line = next(line for line in result.stdout.splitlines() if line.startswith("Restored in"))
    shutil.rmtree(source.folder, ignore_errors=True)
    if databases == "2":
        assert "KINDRED_DATABASES=auth,profile,discovery:match,chat,notify" in result.stdout, result.stdout
        assert (restored_folder / "data" / "postgres-2" / "kindred-services").read_text().split() == \
            ["match", "chat", "notify"]
    assert not (restored_folder / "data" / "nats").exists(), "a JetStream store restored"
    restored = Cluster(folder=restored_folder, KINDRED_PROFILE_PHOTO_DIR=str(restored_photos),
                       KINDRED_DATABASES=databases, **SETTINGS)
    try:
        check_restored(restored, community, members, writes, moment, tokens_before_t, late_email,
                       (photo_before_backup, photo_before_t, photo_after_t))
    finally:
        assert_clean_stop(restored, restored.pids())
    print(f"\nbackup+restore: {len(writes.swipes)} swipes, {len(writes.matches)} matches, "
          f"{sum(len(m) for m in writes.messages.values())} messages written; backup.sh {backup_seconds:.1f} s "
          f"({backed_up}), restore.sh {restore_seconds:.1f} s ({restored_line})")


def durables_caught_up(cluster) -> bool:
    """On NATS JetStream: no durable consumer of any producer's stream has a message left to take or to
    acknowledge (read with nats-py, an independent client)."""
    async def check():
        connection = await nats.connect(servers=[f"nats://127.0.0.1:{cluster.base + 310 + node}" for node in range(3)],
                                        connect_timeout=5, max_reconnect_attempts=5)
        try:
            js = connection.jetstream()
            for producer in EVENT_PRODUCERS:
                for consumer in await js.consumers_info(f"KINDRED_{producer.upper()}"):
                    if consumer.num_pending or consumer.num_ack_pending:
                        return False
            return True
        finally:
            await connection.close()
    try:
        return asyncio.run(check())
    except (nats.errors.Error, TimeoutError):
        return False


def check_restored(cluster, community, members, writes, moment, tokens_before_t, late_email, photo_ids):
    index_of = {m.id: m.index for m in members}
    # Swipes: acknowledged before T stored exactly as answered; sent after T absent; in flight at T either.
    stored = {}
    for row in cluster.psql(f"SELECT swiper, target, action, outcome, coalesce(match_id::text, '') "
                            f"FROM match.swipes WHERE community_id = '{community}'").splitlines():
        swiper, target, action, outcome, match_id = row.split("|")
        key = (index_of[swiper], index_of[target])
        assert key not in stored, f"swipe {key} stored twice"
        stored[key] = (int(action), int(outcome), match_id)
    kept = lost = 0
    for key, (sent, acknowledged, action, outcome, match_id) in writes.swipes.items():
        if acknowledged < moment:
            assert stored.get(key) == (action, outcome, match_id), f"swipe {key} acknowledged before T: {stored.get(key)}"
            kept += 1
        elif sent > moment:
            assert key not in stored, f"swipe {key} sent after T was restored"
            lost += 1
    assert set(stored) <= set(writes.swipes), "a swipe nobody made"
    assert kept and lost, f"the run should have swipes on both sides of T ({kept} before, {lost} after)"

    matches = cluster.psql(f"SELECT user_low, user_high, match_id FROM match.matches "
                           f"WHERE community_id = '{community}' AND ended_at IS NULL").splitlines()
    restored_matches = {}
    for low, high, match_id in (row.split("|") for row in matches):
        pair = frozenset((index_of[low], index_of[high]))
        assert pair not in restored_matches, f"two matches for {pair}"
        restored_matches[pair] = match_id
    for pair, (sent, acknowledged, match_id) in writes.matches.items():
        if acknowledged < moment:
            assert restored_matches.get(pair) == match_id, f"match {pair} acknowledged before T is missing"
        elif sent > moment:
            assert pair not in restored_matches, f"match {pair} made after T was restored"

    rows = cluster.psql(f"SELECT thread_id, client_message_id, message_id, sequence FROM chat.messages "
                        f"WHERE thread_id IN ({', '.join(repr(t) for t in writes.messages)})").splitlines()
    by_thread = {}
    for thread_id, client_id, message_id, sequence in (row.split("|") for row in rows):
        assert client_id not in by_thread.setdefault(thread_id, {}), f"message {client_id} stored twice"
        by_thread[thread_id][client_id] = (message_id, int(sequence))
    before = after = 0
    for thread_id, sent_messages in writes.messages.items():
        for client_id, (sent, acknowledged, message_id) in sent_messages.items():
            if acknowledged < moment:
                assert by_thread.get(thread_id, {}).get(client_id, (None,))[0] == message_id, \
                    f"message {client_id} acknowledged before T is missing"
                before += 1
            elif sent > moment:
                assert client_id not in by_thread.get(thread_id, {}), f"message {client_id} sent after T was restored"
                after += 1
        sequences = sorted(sequence for _, sequence in by_thread.get(thread_id, {}).values())
        assert sequences == list(range(1, len(sequences) + 1)), f"thread {thread_id}: sequence gaps"
    assert before and after, f"the run should have messages on both sides of T ({before} before, {after} after)"

    # Photos: the rows of those uploaded before T, with their bytes (from the restored folder); not the later one.
    first, second, late = photo_ids
    photo_rows = set(cluster.psql("SELECT id FROM profile.photos").splitlines())
    assert {first, second} <= photo_rows and late not in photo_rows, (photo_ids, photo_rows)
    # An account made after T is not there.
    assert cluster.psql(f"SELECT count(*) FROM auth.accounts WHERE email = '{late_email}'") == "0"

    print(f"\nrestored at T: swipes {kept} acknowledged before (all found), {lost} sent after (none found); "
          f"messages {before} acknowledged before (all found), {after} sent after (none found)")
    with channel_to(cluster.gateway) as channel:
        profiles = profile_pb2_grpc.ProfileServiceStub(channel)
        for index, photo_id in ((0, first), (1, second)):
            got = profiles.GetPhoto(profile_pb2.GetPhotoRequest(photo_id=photo_id, variant=common_pb2.PHOTO_VARIANT_CARD,
                                                                format="jpeg"), metadata=members[index].auth,
                                    timeout=TIMEOUT)
            assert Image.open(io.BytesIO(got.data)).size == (640, 800)

        # Events: every event reaches its consumers, those notify had not applied at T too; discovery holds every
        # restored swipe, chat every restored match. On NATS, every durable consumer has also gone through what the
        # relays published again (the inboxes dropped what they held) before the writes below wait on them.
        wait_for("every event delivered", lambda: all_events_delivered(cluster, EVENT_PRODUCERS), timeout=90,
                 interval=0.5)
        late = int(cluster.psql(f"SELECT count(*) FROM notify.events_inbox WHERE processed_at > '{utc(moment)}'"))
        assert late > 0, "notify had applied everything at T: the test did not hold events back"
        if cluster.on_nats:
            wait_for("every durable consumer caught up", lambda: durables_caught_up(cluster), timeout=90, interval=1)
        assert cluster.psql(f"SELECT count(*) FROM discovery.swipes WHERE community_id = '{community}'") == \
            str(len(stored))
        assert set(cluster.psql(f"SELECT thread_id FROM chat.threads WHERE community_id = '{community}'")
                   .splitlines()) == set(restored_matches.values())

        # Decks answer, without anyone the member swiped on (members' tokens from before still work: auth's
        # signing key and the sessions came back).
        deck = deck_pb2_grpc.DeckServiceStub(channel)
        chat = chat_pb2_grpc.ChatServiceStub(channel)
        for member in members:
            swiped = {members[t].id for (s, t) in stored if s == member.index}
            cards = [c.profile.user_id for c in deck.GetDeck(deck_pb2.GetDeckRequest(page_size=50),
                                                               metadata=member.auth, timeout=TIMEOUT).cards]
            assert cards and not swiped & set(cards), f"member {member.index}'s deck after the restore"

        # Streams: a fresh Subscribe, one resumed from a token of before T, and one resumed from a token of after T
        # (its client saw events the restore took back: it is told to resync, then carries on) all receive a new
        # match's message.
        a, b = members[0], members[3]
        assert int(writes.tokens[3][3:]) > int(tokens_before_t[3][3:]), "member 3's stream moved on after T"
        seen = {"fresh": [], "resumed": [], "ahead": []}
        calls = {"fresh": chat.Subscribe(chat_pb2.SubscribeRequest(), metadata=a.auth, timeout=120),
                 "resumed": chat.Subscribe(chat_pb2.SubscribeRequest(resume_token=tokens_before_t[3]),
                                           metadata=b.auth, timeout=120),
                 "ahead": chat.Subscribe(chat_pb2.SubscribeRequest(resume_token=writes.tokens[3]),
                                         metadata=b.auth, timeout=120)}
        resyncs = []

        def read(name):
            try:
                for event in calls[name]:
                    if event.WhichOneof("event") == "message":
                        seen[name].append(event.message.message_id)
                    elif event.WhichOneof("event") == "resync_required":
                        resyncs.append(name)
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.CANCELLED:
                    writes.failures.append(f"{name} stream: {error.code()} {error.details()}")
        for name in calls:
            threading.Thread(target=read, args=(name,), daemon=True).start()
        deck.Swipe(deck_pb2.SwipeRequest(target_user_id=b.id, action=LIKE, surface="deck"), metadata=a.auth,
                   timeout=TIMEOUT)
        matched = deck.Swipe(deck_pb2.SwipeRequest(target_user_id=a.id, action=LIKE, surface="deck"), metadata=b.auth,
                             timeout=TIMEOUT)
        assert matched.outcome == deck_pb2.SWIPE_OUTCOME_MATCHED
        message = chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=matched.match.match_id,
                                                               client_message_id="after-restore", body="still here"),
                                   metadata=a.auth, timeout=TIMEOUT).message
        wait_for("the new message on both streams", lambda: all(message.message_id in s for s in seen.values()),
                 timeout=30, interval=0.1)
        time.sleep(0.5)
        for call in calls.values():
            call.cancel()
        assert all(received.count(message.message_id) == 1 for received in seen.values()), seen
        assert resyncs == ["ahead"] and not writes.failures, (resyncs, writes.failures)
