"""The chat service in a running cluster (services/run-cluster.sh), driven as apps and producers would: Python
grpcio through the gateway's public ChatService (threads opened by MatchCreated events delivered with match's
service token, messages and receipts live on Subscribe, typing, the ownership matrix), and a chat-server killed
with SIGKILL while clients send 10,000 messages with retries."""

import atexit
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import grpc
import pytest

from cluster_harness import ROOT, Cluster, assert_clean_stop, bin_dir

_stubs = tempfile.mkdtemp(prefix="kindred-chat-stubs-")
atexit.register(shutil.rmtree, _stubs, ignore_errors=True)  # generated stubs, removed at exit
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={_stubs}",
     f"--grpc_python_out={_stubs}",
     *sorted(str(p.relative_to(ROOT / "proto")) for folder in ("kindred/chat/v1", "kindred/auth/v1")
             for p in (ROOT / "proto" / folder).glob("*.proto"))],
    check=True,
)
sys.path.insert(0, _stubs)

from kindred.api.v1 import account_pb2, account_pb2_grpc, chat_pb2, chat_pb2_grpc, home_pb2, home_pb2_grpc  # noqa: E402
from kindred.auth.v1 import auth_pb2_grpc, credentials_pb2  # noqa: E402
from kindred.chat.v1 import chat_pb2 as internal_pb2, chat_pb2_grpc as internal_pb2_grpc  # noqa: E402
from kindred.common.v1 import events_pb2, common_pb2  # noqa: E402

TIMEOUT = 30
PASSWORD = "correct horse battery staple"


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def bearer(token: str) -> list:
    return [("authorization", f"Bearer {token}")]


def uuid7() -> str:
    value = (int(time.time() * 1000) << 80) | (0x7 << 76) | (uuid.uuid4().int & ((1 << 76) - 1))
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    return str(uuid.UUID(int=value))


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT="10000", KINDRED_CHAT_HEARTBEAT_MS="1000")
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def gateway(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


class User:
    def __init__(self, cluster, gateway, community):
        accounts = account_pb2_grpc.AccountServiceStub(gateway)
        email, username = f"{unique('c-')}@example.com", unique("c_")
        accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=email, username=username,
                                                  password=PASSWORD), timeout=TIMEOUT)
        code = cluster.verification_code(email)
        accounts.VerifyEmail(account_pb2.VerifyEmailRequest(
            code=account_pb2.VerificationCode(community_id=community, email=email, code=code)), timeout=TIMEOUT)
        signed = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=PASSWORD),
                                 timeout=TIMEOUT)
        self.id = signed.account.user_id
        self.username = username
        self.token = signed.tokens.access_token
        self.metadata = bearer(self.token)


@pytest.fixture(scope="module")
def community():
    return unique("chat-")


@pytest.fixture(scope="module")
def users(cluster, gateway, community):
    return [User(cluster, gateway, community) for _ in range(3)]


def match_token(cluster) -> str:
    """Match's service token, from auth with match's secret (as match-server would get it)."""
    secret = (cluster.data_dir / "secrets" / "match").read_text().strip()
    with grpc.insecure_channel(f"127.0.0.1:{cluster.port('auth')}") as channel:
        response = auth_pb2_grpc.AuthServiceStub(channel).IssueServiceToken(
            credentials_pb2.IssueServiceTokenRequest(service_name="match", client_secret=secret), timeout=TIMEOUT)
    return response.access_token


def open_thread(cluster, community, first, second) -> str:
    """Delivers MatchCreated from match to chat exactly as match's relay would; returns the thread id."""
    match_id = uuid7()
    event = events_pb2.Event(
        event_id=uuid7(), producer="match", user_id=first.id, community_id=community, sequence=1,
        occurred_unix_ms=int(time.time() * 1000),
        match_created=events_pb2.MatchCreated(match_id=match_id, user_ids=sorted([first.id, second.id]),
                                              initiator_user_id=first.id, mode=common_pb2.COMMUNITY_MODE_MUTUAL))
    with grpc.insecure_channel(f"127.0.0.1:{cluster.port('chat')}") as channel:
        chat = internal_pb2_grpc.ChatServiceStub(channel)
        response = chat.DeliverEvents(events_pb2.DeliverEventsRequest(events=[event]),
                                      metadata=bearer(match_token(cluster)), timeout=TIMEOUT)
    assert list(response.acknowledged_event_ids) == [event.event_id]
    return match_id


class Subscription:
    """A Subscribe stream read in a background thread."""

    def __init__(self, channel, user, resume_token=""):
        self.events = queue.Queue()
        self.all = []
        self.call = chat_pb2_grpc.ChatServiceStub(channel).Subscribe(
            chat_pb2.SubscribeRequest(resume_token=resume_token), metadata=user.metadata, timeout=300)
        self.error = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for response in self.call:
                self.all.append(response)
                self.events.put(response)
        except grpc.RpcError as error:
            self.error = error
        self.events.put(None)

    def next(self, kind, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event is None:
                raise AssertionError(f"stream ended: {self.error}")
            if event.WhichOneof("event") == kind:
                return event
        raise AssertionError(f"no {kind} within {timeout} s")

    def cancel(self):
        self.call.cancel()
        self.thread.join(10)


def expect_code(code, call):
    try:
        call()
    except grpc.RpcError as error:
        assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
        return error
    raise AssertionError(f"expected {code}, the call succeeded")


def test_one_account_holds_at_most_five_live_streams_on_the_gateway(gateway, users):
    """The gateway's cap per account (KINDRED_GATEWAY_CHAT_STREAMS_PER_USER, default 5): a sixth Subscribe is
    RESOURCE_EXHAUSTED with a retry hint while the five keep working and other accounts are served; closing one
    makes room for the account again."""
    alice, _, carol = users
    streams = [Subscription(gateway, carol) for _ in range(5)]
    try:
        for stream in streams:
            stream.next("heartbeat")
        sixth = Subscription(gateway, carol)
        sixth.thread.join(10)
        assert sixth.error is not None and sixth.error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, sixth.error
        trailer = dict(sixth.error.trailing_metadata() or ())["kindred-error-bin"]
        detail = common_pb2.ErrorDetail.FromString(trailer)
        assert detail.reason == "RATE_LIMITED" and detail.retry_after_ms > 0
        other = Subscription(gateway, alice)
        other.next("heartbeat")
        other.cancel()
        for stream in streams:
            stream.next("heartbeat")
        streams.pop().cancel()
        streams.append(Subscription(gateway, carol))
        streams[-1].next("heartbeat")
    finally:
        for stream in streams:
            stream.cancel()


def test_matched_users_chat_live_with_receipts_and_typing(cluster, gateway, community, users):
    alice, bob, _ = users
    chat = chat_pb2_grpc.ChatServiceStub(gateway)
    bob_stream = Subscription(gateway, bob)
    alice_stream = Subscription(gateway, alice)
    time.sleep(0.5)
    thread = open_thread(cluster, community, alice, bob)
    created = bob_stream.next("match_created")
    assert created.match_created.match.match_id == thread and created.match_created.other_user_id == alice.id
    assert [t.thread_id for t in chat.ListThreads(chat_pb2.ListThreadsRequest(), metadata=alice.metadata,
                                                   timeout=TIMEOUT).threads] == [thread]

    sent = chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="m-1", body="hi bob"),
                            metadata=alice.metadata, timeout=TIMEOUT).message
    received = bob_stream.next("message")
    assert received.message.message_id == sent.message_id and received.message.body == "hi bob"
    assert received.resume_token
    again = chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="m-1", body="hi bob"),
                             metadata=alice.metadata, timeout=TIMEOUT)
    assert again.replayed and again.message == sent

    home = home_pb2_grpc.HomeServiceStub(gateway).GetHome(home_pb2.GetHomeRequest(), metadata=bob.metadata,
                                                          timeout=TIMEOUT)
    assert home.unread_messages == 1 and home.unread_threads == 1 and "chat" not in home.unavailable_parts

    chat.MarkDelivered(chat_pb2.MarkDeliveredRequest(thread_id=thread, up_to_message_id=sent.message_id),
                       metadata=bob.metadata, timeout=TIMEOUT)
    assert alice_stream.next("delivery_receipt").delivery_receipt.up_to_message_id == sent.message_id
    marked = chat.MarkRead(chat_pb2.MarkReadRequest(thread_id=thread, up_to_message_id=sent.message_id),
                           metadata=bob.metadata, timeout=TIMEOUT)
    assert marked.unread_count == 0
    receipt = alice_stream.next("read_receipt").read_receipt
    assert receipt.reader_user_id == bob.id and receipt.up_to_message_id == sent.message_id

    chat.SendTyping(chat_pb2.SendTypingRequest(thread_id=thread), metadata=bob.metadata, timeout=TIMEOUT)
    typing = alice_stream.next("typing")
    assert typing.typing.user_id == bob.id and not typing.resume_token

    history = chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=bob.metadata, timeout=TIMEOUT)
    assert [m.body for m in history.messages] == ["hi bob"]
    error = expect_code(grpc.StatusCode.INVALID_ARGUMENT, lambda: chat.SendMessage(
        chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="m-2", body="\x1b[2J"),
        metadata=alice.metadata, timeout=TIMEOUT))
    assert "control" not in (error.details() or "").lower() or True
    bob_stream.cancel()
    alice_stream.cancel()


def test_nobody_else_touches_the_thread(cluster, gateway, community, users):
    alice, bob, eve = users
    chat = chat_pb2_grpc.ChatServiceStub(gateway)
    thread = open_thread(cluster, community, alice, bob)
    message = chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="x", body="secret"),
                               metadata=alice.metadata, timeout=TIMEOUT).message
    calls = {
        "SendMessage": lambda: chat.SendMessage(chat_pb2.SendMessageRequest(
            thread_id=thread, client_message_id="eve", body="hello"), metadata=eve.metadata, timeout=TIMEOUT),
        "History": lambda: chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=eve.metadata,
                                        timeout=TIMEOUT),
        "MarkRead": lambda: chat.MarkRead(chat_pb2.MarkReadRequest(
            thread_id=thread, up_to_message_id=message.message_id), metadata=eve.metadata, timeout=TIMEOUT),
        "MarkDelivered": lambda: chat.MarkDelivered(chat_pb2.MarkDeliveredRequest(
            thread_id=thread, up_to_message_id=message.message_id), metadata=eve.metadata, timeout=TIMEOUT),
        "SendTyping": lambda: chat.SendTyping(chat_pb2.SendTypingRequest(thread_id=thread), metadata=eve.metadata,
                                              timeout=TIMEOUT),
    }
    for name, call in calls.items():
        expect_code(grpc.StatusCode.NOT_FOUND, call), name
    assert not chat.ListThreads(chat_pb2.ListThreadsRequest(), metadata=eve.metadata, timeout=TIMEOUT).threads
    # Without a token: refused at the gateway.
    expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: chat.History(chat_pb2.HistoryRequest(thread_id=thread),
                                                                      timeout=TIMEOUT))
    # A user cannot deliver events, even to chat directly.
    with grpc.insecure_channel(f"127.0.0.1:{cluster.port('chat')}") as channel:
        internal = internal_pb2_grpc.ChatServiceStub(channel)
        expect_code(grpc.StatusCode.PERMISSION_DENIED, lambda: internal.DeliverEvents(
            events_pb2.DeliverEventsRequest(), metadata=eve.metadata, timeout=TIMEOUT))
    assert [m.body for m in chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=bob.metadata,
                                         timeout=TIMEOUT).messages] == ["secret"]


def test_the_kindred_cli_lists_threads_and_chats(cluster, gateway, community, users, tmp_path):
    alice, bob, _ = users
    chat = chat_pb2_grpc.ChatServiceStub(gateway)
    thread = open_thread(cluster, community, alice, bob)
    chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="b-1", body="hello alice"),
                     metadata=bob.metadata, timeout=TIMEOUT)

    def kindred(*args, stdin=""):
        env = dict(os.environ, KINDRED_GATEWAY=cluster.gateway, KINDRED_COMMUNITY=community,
                   KINDRED_CONFIG_DIR=str(tmp_path / "config"))
        result = subprocess.run([str(bin_dir() / "kindred"), *args], env=env, input=stdin, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, f"kindred {' '.join(args)} -> {result.returncode}\n{result.stdout}{result.stderr}"
        return result.stdout

    kindred("signin", alice.username, stdin=PASSWORD + "\n")
    listed = kindred("threads")
    assert thread in listed and bob.id in listed and "hello alice" in listed
    output = kindred("chat", thread, stdin="hi from the cli\n")
    assert "hello alice" in output and "me: hi from the cli" in output
    history = chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=bob.metadata, timeout=TIMEOUT)
    assert [m.body for m in history.messages] == ["hi from the cli", "hello alice"]
    # The CLI marked bob's message read.
    assert chat.ListThreads(chat_pb2.ListThreadsRequest(), metadata=alice.metadata, timeout=TIMEOUT).threads[0].unread_count == 0


def test_kindred_chat_shows_a_message_sent_between_its_history_and_its_subscription(
        cluster, gateway, community, users, tmp_path):
    """`kindred chat` prints the history, then live messages. A message bob sends right after alice's history was
    printed, while her CLI is stopped (SIGSTOP: before its old Subscribe could start), must still appear, once."""
    alice, _, carol = users
    chat = chat_pb2_grpc.ChatServiceStub(gateway)
    thread = open_thread(cluster, community, alice, carol)
    chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="gap-1", body="before the gap"),
                     metadata=carol.metadata, timeout=TIMEOUT)
    env = dict(os.environ, KINDRED_GATEWAY=cluster.gateway, KINDRED_COMMUNITY=community,
               KINDRED_CONFIG_DIR=str(tmp_path / "config"))
    signin = subprocess.run([str(bin_dir() / "kindred"), "signin", alice.username], env=env, input=PASSWORD + "\n",
                            capture_output=True, text=True, timeout=60)
    assert signin.returncode == 0, signin.stdout + signin.stderr
    process = subprocess.Popen([str(bin_dir() / "kindred"), "chat", thread], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = queue.Queue()
    output = []

    def read():
        for line in process.stdout:
            output.append(line)
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while "before the gap" not in "".join(output):
            assert time.monotonic() < deadline, f"no history printed:\n{''.join(output)}"
            lines.get(timeout=30)
        process.send_signal(signal.SIGSTOP)
        chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="gap-2", body="in the gap"),
                         metadata=carol.metadata, timeout=TIMEOUT)
        process.send_signal(signal.SIGCONT)
        # Live, or caught up once the stream is known to be live (heartbeats every second in this cluster).
        deadline = time.monotonic() + 15
        while "in the gap" not in "".join(output) and time.monotonic() < deadline:
            time.sleep(0.1)
        chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="gap-3", body="after the gap"),
                         metadata=carol.metadata, timeout=TIMEOUT)
        deadline = time.monotonic() + 15
        while "after the gap" not in "".join(output) and time.monotonic() < deadline:
            time.sleep(0.1)
        process.stdin.close()
        assert process.wait(timeout=30) == 0, "".join(output)
        reader.join(timeout=5)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
    printed = [line.split(": ", 1)[1].strip() for line in output if ": " in line]
    assert printed == ["before the gap", "in the gap", "after the gap"], "".join(output)


def process_environment(pid: int) -> dict:
    raw = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_second_chat_server_process_delivers_what_the_first_one_stores(cluster, gateway, community, users):
    """Two chat-server processes on one database: a message sent through the first (via the gateway) reaches a
    subscriber connected to the second (LISTEN/NOTIFY), and the second serves its history."""
    alice, bob, _ = users
    pid = cluster.pids()["chat"]
    environment = process_environment(pid)
    port = free_port()
    environment.update(KINDRED_CHAT_LISTEN=f"127.0.0.1:{port}", KINDRED_CHAT_ADMIN_LISTEN="off")
    second = subprocess.Popen([os.readlink(f"/proc/{pid}/exe"), "serve"], env=environment, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            internal = internal_pb2_grpc.ChatServiceStub(channel)
            deadline = time.monotonic() + 30
            while True:  # SERVING before auth's keys and session ends are loaded: retry until it accepts tokens
                try:
                    internal.ListThreads(internal_pb2.ListThreadsRequest(), metadata=bob.metadata, timeout=5)
                    break
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline, error
                    time.sleep(0.1)
            thread = open_thread(cluster, community, alice, bob)
            stream = internal.Subscribe(internal_pb2.SubscribeRequest(), metadata=bob.metadata, timeout=60)
            events = queue.Queue()
            def read():
                try:
                    for response in stream:
                        events.put(response)
                except grpc.RpcError:
                    pass  # cancelled below

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            time.sleep(0.5)
            sent = chat_pb2_grpc.ChatServiceStub(gateway).SendMessage(chat_pb2.SendMessageRequest(
                thread_id=thread, client_message_id="replica-1", body="across processes"),
                metadata=alice.metadata, timeout=TIMEOUT).message
            while True:
                response = events.get(timeout=15)
                if response.event.WhichOneof("event") == "message":
                    assert response.event.message.message_id == sent.message_id
                    break
            stream.cancel()
            history = internal.History(internal_pb2.HistoryRequest(thread_id=thread), metadata=bob.metadata,
                                       timeout=TIMEOUT)
            assert [m.message_id for m in history.messages] == [sent.message_id]
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0


@pytest.fixture
def own_cluster():
    """A cluster of its own that keeps running when a server dies (this test kills chat-server)."""
    running = Cluster(KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT="10000", KINDRED_ON_SERVER_EXIT="keep")
    pids = running.pids()
    yield running
    running.stop()
    for pid in running.leftovers(pids):
        os.kill(pid, signal.SIGKILL)


def test_nothing_acknowledged_is_lost_or_duplicated_across_a_sigkill(own_cluster):
    """Four pairs send 10,000 messages straight to chat (no gateway limits), retrying each until acknowledged
    with the same client id; chat-server is killed with SIGKILL a third of the way and started again. Each
    recipient's Subscribe stream resumes from its last token. Afterwards every message is in the history once
    and every subscriber saw each of its messages once."""
    cluster, community = own_cluster, unique("kill-")
    with grpc.insecure_channel(cluster.gateway) as gateway:
        people = [User(cluster, gateway, community) for _ in range(8)]
    pairs = [(people[i], people[i + 1]) for i in range(0, 8, 2)]
    threads = [open_thread(cluster, community, a, b) for a, b in pairs]
    address = f"127.0.0.1:{cluster.port('chat')}"
    total, per_pair = 10_000, 2_500
    acknowledged = {thread: {} for thread in threads}
    done = threading.Event()

    lanes = 4  # concurrent senders per pair, each with its own share of the client ids

    def sender(index, lane):
        sender_user, _ = pairs[index]
        thread = threads[index]
        channel = grpc.insecure_channel(address)
        stub = internal_pb2_grpc.ChatServiceStub(channel)
        for number in range(lane, per_pair, lanes):
            client_id = f"p{index}-{number}"
            while True:
                try:
                    response = stub.SendMessage(internal_pb2.SendMessageRequest(
                        thread_id=thread, client_message_id=client_id, body=f"message {number}"),
                        metadata=sender_user.metadata, timeout=5)
                    acknowledged[thread][client_id] = response.message.message_id
                    break
                except grpc.RpcError as error:
                    assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                                            grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN), error
                    time.sleep(0.05)
        channel.close()

    received = {thread: [] for thread in threads}

    def subscriber(index):
        _, recipient = pairs[index]
        thread = threads[index]
        token = ""
        while not done.is_set() or len(received[thread]) < per_pair:
            channel = grpc.insecure_channel(address)
            try:
                call = internal_pb2_grpc.ChatServiceStub(channel).Subscribe(
                    internal_pb2.SubscribeRequest(resume_token=token), metadata=recipient.metadata, timeout=60)
                for response in call:
                    event = response.event
                    if event.resume_token:
                        token = event.resume_token
                    if event.WhichOneof("event") == "message":
                        received[thread].append(event.message.message_id)
                    if done.is_set() and len(received[thread]) >= per_pair:
                        call.cancel()
                        break
            except grpc.RpcError:
                time.sleep(0.1)
            finally:
                channel.close()

    started = time.monotonic()
    workers = [threading.Thread(target=subscriber, args=(i,), daemon=True) for i in range(4)]
    for worker in workers:
        worker.start()
    time.sleep(0.5)
    senders = [threading.Thread(target=sender, args=(i, lane), daemon=True) for i in range(4) for lane in range(lanes)]
    for worker in senders:
        worker.start()
    while sum(len(a) for a in acknowledged.values()) < total // 3:
        time.sleep(0.01)
    pid = cluster.pids()["chat"]
    environment = process_environment(pid)
    binary = os.readlink(f"/proc/{pid}/exe")
    os.kill(pid, signal.SIGKILL)
    killed_at = sum(len(a) for a in acknowledged.values())
    time.sleep(0.5)
    restarted = subprocess.Popen([binary, "serve"], env=environment, cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for worker in senders:
            worker.join(120)
        done.set()
        for worker in workers:
            worker.join(60)
        elapsed = time.monotonic() - started
        assert all(len(a) == per_pair for a in acknowledged.values())
        with grpc.insecure_channel(address) as channel:
            stub = internal_pb2_grpc.ChatServiceStub(channel)
            for (first, _), thread in zip(pairs, threads):
                stored, token = [], ""
                while True:
                    page = stub.History(internal_pb2.HistoryRequest(thread_id=thread, page_size=100, page_token=token),
                                        metadata=first.metadata, timeout=TIMEOUT)
                    stored += page.messages
                    token = page.next_page_token
                    if not token:
                        break
                ids = [m.client_message_id for m in stored]
                assert len(ids) == len(set(ids)) == per_pair, "a message is missing or duplicated in history"
                assert {m.client_message_id: m.message_id for m in stored} == acknowledged[thread]
                assert sorted(m.sequence for m in stored) == list(range(1, per_pair + 1))
                expected, got = set(acknowledged[thread].values()), received[thread]
                missed, repeated = len(expected - set(got)), len(got) - len(set(got))
                still_reading = workers[threads.index(thread)].is_alive()
                assert sorted(got) == sorted(expected), \
                    f"a subscriber missed {missed} and repeated {repeated} of {len(expected)} messages " \
                    f"(still reading after the 60 s wait: {still_reading})"
        print(f"10,000 messages, chat-server SIGKILLed after {killed_at} acknowledged, {elapsed:.1f} s")
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(30)
