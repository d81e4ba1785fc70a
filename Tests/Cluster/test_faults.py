"""Nothing acknowledged is lost (issue 14): a load driver runs swipes (mutual likes, so matches happen), chat
messages (client message ids, retried until acknowledged), deck fetches and live Subscribe streams through the
gateway of a cluster started with KINDRED_ON_SERVER_EXIT=restart, while every server in turn (auth, profile,
discovery, match, chat, gateway) and then PostgreSQL itself are killed with SIGKILL and started again by
services/run-cluster.sh. Afterwards: every acknowledged swipe, match and message is stored exactly once, every
event reached its consumers (outbox cursors caught up; discovery's swipes and chat's threads hold them), decks
answer, and every resumed subscriber received each of its messages exactly once. On the same cluster: 210 live
Subscribe streams through one gateway leave room for every other chat call (a limit `kindred-load mixed`
found). The driver, the faults and the check are acknowledged_writes.py's, which the soak (Tests/Soak) shares."""
import collections
import threading
import time

import grpc
import pytest

from acknowledged_writes import (BOOTSTRAP_SECRET, CHANNEL_OPTIONS, SERVICES, Driver, Member, SwipePlan,
                                 channel_to, check_nothing_lost, kill_postgres, kill_server, members_with_profiles)
from cluster_harness import Cluster, assert_clean_stop
from test_cluster import unique

from kindred.api.v1 import chat_pb2, chat_pb2_grpc  # noqa: E402

MEMBERS = 16


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_ON_SERVER_EXIT="restart", KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET,
                      KINDRED_CHAT_HEARTBEAT_MS="1000", KINDRED_MATCH_SWIPE_RATE="100000",
                      KINDRED_MATCH_SWIPE_BURST="100000", KINDRED_CHAT_MAX_STREAMS_PER_USER="100",
                      KINDRED_GATEWAY_CHAT_STREAMS_PER_USER="100")
    yield running
    # The restarted servers and PostgreSQL stop as cleanly as the first ones would have (the pids file follows
    # the restarts).
    assert_clean_stop(running, running.pids())


def test_nothing_acknowledged_is_lost_when_servers_and_postgres_are_killed(cluster):
    started = time.monotonic()
    community, members = members_with_profiles(cluster, MEMBERS)
    plan = SwipePlan(MEMBERS)
    driver = Driver(cluster.gateway, members)
    # The swipes spread over the fault sequence.
    swiper = driver.start_load(plan, swipe_pause=0.35)

    faults = []
    driver.progress(40, "before the faults")
    for name in SERVICES:
        kill_server(cluster, name)
        faults.append((name, driver.acknowledged()))
        driver.progress(40, f"after {name} restarted")
    kill_postgres(cluster)
    faults.append(("postgres", driver.acknowledged()))
    driver.progress(60, "after postgres restarted")
    swiper.join(120)
    assert not swiper.is_alive(), "the swipe plan did not finish"
    driver.progress(40, "after the last swipe")
    driver.stop_load()

    found = check_nothing_lost(cluster, driver, community, plan)
    print(f"\nfaults: killed {', '.join(f'{n} at {a}' for n, a in faults)} acknowledged calls; "
          f"swipes acknowledged {found['swipes acknowledged']}, found {found['swipes found']}, duplicates 0; "
          f"matches expected {found['matches expected']}, found {found['matches found']}, duplicates 0; "
          f"messages acknowledged {found['messages acknowledged']}, found {found['messages found']}, "
          f"duplicates {found['message duplicates']}; stream deliveries {found['stream deliveries']}, "
          f"duplicates {found['stream duplicates']}, resubscribes {found['resubscribes']}; "
          f"deck answers {found['deck answers']}; retried {found['retried']}; {time.monotonic() - started:.0f} s")


def test_hundreds_of_live_subscribers_leave_room_for_every_other_chat_call(cluster):
    """Found by `kindred-load mixed`: the gateway proxied each Subscribe stream over the same two connections to
    chat as the unary calls, and chat allows 100 concurrent streams per connection, so 200 live subscribers
    took every stream and each SendMessage, History or ListThreads through the gateway waited out its deadline.
    Here 210 streams are open at once (3 members, 70 devices each): every one of them gets chat's heartbeat,
    a message sent meanwhile is acknowledged at once and reaches all 140 streams of the thread's two members."""
    from test_chat import open_thread  # noqa: PLC0415 - chat's helper (MatchCreated with match's token)

    community = unique("streams-")
    with channel_to(cluster.gateway) as setup:
        people = [Member(cluster, setup, community, index) for index in range(3)]
    thread = open_thread(cluster, community, people[0], people[1])
    # Four connections (the gateway allows 100 streams on one): grpcio shares one connection between channels
    # to the same address unless each has its own subchannel pool.
    channels = [grpc.insecure_channel(cluster.gateway, options=CHANNEL_OPTIONS + [
        ("grpc.use_local_subchannel_pool", 1)]) for _ in range(4)]
    seen = [[] for _ in range(210)]
    ended = {}  # index -> how a stream that never started ended
    calls = []

    def read(index, call):
        try:
            for event in call:
                seen[index].append(event.WhichOneof("event") == "message" and event.message.message_id)
        except grpc.RpcError as error:
            if not seen[index]:
                ended[index] = f"{error.code().name} ({error.details()})"

    try:
        for index in range(210):
            call = chat_pb2_grpc.ChatServiceStub(channels[index % 4]).Subscribe(
                chat_pb2.SubscribeRequest(), metadata=people[index % 3].auth, timeout=120)
            calls.append(call)
            threading.Thread(target=read, args=(index, call), daemon=True).start()
        deadline = time.monotonic() + 30
        while not all(seen) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(seen), (f"{sum(1 for s in seen if not s)} of 210 Subscribe streams never started; "
                           f"ended: {collections.Counter(ended.values())}")
        sent = chat_pb2_grpc.ChatServiceStub(channels[0]).SendMessage(chat_pb2.SendMessageRequest(
            thread_id=thread, client_message_id="with-210-streams", body="still room"),
            metadata=people[0].auth, timeout=5).message
        receivers = [index for index in range(210) if index % 3 != 2]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(sent.message_id in seen[i] for i in receivers):
            time.sleep(0.1)
        missing = [i for i in receivers if sent.message_id not in seen[i]]
        assert not missing, f"{len(missing)} of {len(receivers)} streams did not receive the message"
        assert not any(sent.message_id in seen[i] for i in range(2, 210, 3)), "a stranger's stream got it"
    finally:
        for call in calls:
            call.cancel()
        for channel in channels:
            channel.close()
