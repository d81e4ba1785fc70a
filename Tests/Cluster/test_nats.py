"""Events on NATS JetStream (services/run-cluster.sh --nats): a cluster whose events travel on a three-node
JetStream cluster instead of the PostgreSQL push relay. The product's flows work the same (members known to match
and discovery, swipes that match open chat threads, messages, notify and discovery following), nothing acknowledged
is lost or stored twice while a NATS node and then a consumer (chat, then discovery) are killed with SIGKILL under
load, every consumer's inbox holds every event its producers published, and a consumer added later (a new durable,
read here by nats-py, an independent client) replays each producer's stream from its start."""
import asyncio
import os
import signal
import socket
import time

import nats
import pytest

from acknowledged_writes import (BOOTSTRAP_SECRET, EVENT_PRODUCERS, Driver, SwipePlan, check_nothing_lost,
                                 consumers_of, everything_delivered, kill_server, members_with_profiles,
                                 outbox_event_ids, wait_for)
from cluster_harness import Cluster, assert_clean_stop

MEMBERS = 8
PRODUCERS = EVENT_PRODUCERS
PARTITIONS = 8  # EventBusLayout.partitions: durable consumers per producer a consumer follows


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(args=("--nats",), KINDRED_ON_SERVER_EXIT="restart", KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET,
                      KINDRED_CHAT_HEARTBEAT_MS="1000", KINDRED_MATCH_SWIPE_RATE="100000",
                      KINDRED_MATCH_SWIPE_BURST="100000",
                      # Writes wait for their consumers through JetStream (publish, apply, ack, consumer info): on
                      # this shared 2-core machine under build load that took longer than the 3 s default.
                      KINDRED_PROFILE_PROPAGATION_MS="15000", KINDRED_MATCH_MATCH_PROPAGATION_MS="15000",
                      KINDRED_MATCH_BLOCK_PROPAGATION_MS="15000")
    wait_for_every_durable(running, timeout=90)
    yield running
    assert_clean_stop(running, running.pids())


def wait_for_every_durable(cluster, timeout):
    """Each consumer service (each discovery shard under its own name) creates its durable consumers, one per
    partition of each producer it follows, when it starts: the cluster is ready for the flows once they all exist."""
    follows = consumers_of(cluster)
    expected = {producer: PARTITIONS * sum(producer in followed for followed in follows.values())
                for producer in PRODUCERS}

    async def consumers(js):
        return {name: (await js.stream_info(f"KINDRED_{name.upper()}")).state.consumer_count for name in PRODUCERS}
    wait_for("every durable consumer", lambda: on_jetstream(cluster, consumers) == expected, timeout=timeout,
             interval=1)


def nats_urls(cluster):
    return [f"nats://127.0.0.1:{cluster.base + 310 + node}" for node in range(3)]


def on_jetstream(cluster, work):
    """Runs `work(js)` with a nats-py JetStream context on the cluster's NATS servers; a NATS error is a
    RuntimeError (which wait_for retries)."""
    async def run():
        connection = await nats.connect(servers=nats_urls(cluster), connect_timeout=5, max_reconnect_attempts=5)
        try:
            return await work(connection.jetstream())
        finally:
            await connection.close()
    try:
        return asyncio.run(run())
    except nats.errors.Error as error:
        raise RuntimeError(f"NATS: {error!r}") from error


def test_runs_on_jetstream(cluster):
    assert "Started NATS JetStream (three nodes)" in cluster.output()
    assert all(f"nats-{node}" in cluster.pids() for node in range(3))

    async def streams(js):
        return {name: (await js.stream_info(f"KINDRED_{name.upper()}")).config.num_replicas
                for name in PRODUCERS}
    wait_for("every producer's stream", lambda: on_jetstream(cluster, streams) == {p: 3 for p in PRODUCERS},
             timeout=60)


def test_nothing_acknowledged_is_lost_when_a_nats_node_and_consumers_are_killed(cluster):
    started = time.monotonic()
    community, members = members_with_profiles(cluster, MEMBERS)
    plan = SwipePlan(MEMBERS, others=4)
    driver = Driver(cluster.gateway, members)
    swiper = driver.start_load(plan, swipe_pause=0.3)

    driver.progress(20, "before the faults")
    node = f"nats-{time.monotonic_ns() % 3}"
    old = cluster.pids()[node]
    os.kill(old, signal.SIGKILL)
    wait_for(f"{node} restarted", lambda: cluster.pids()[node] != old, timeout=30)
    driver.progress(20, f"after {node} was killed")
    for name in ("chat", "discovery"):
        kill_server(cluster, name)
        driver.progress(20, f"after {name} restarted")
    swiper.join(120)
    assert not swiper.is_alive(), "the swipe plan did not finish"
    driver.progress(10, "after the last swipe")
    driver.stop_load()
    found = check_nothing_lost(cluster, driver, community, plan, events_delivered=lambda: everything_delivered(cluster))
    print(f"\non NATS: killed {node}, chat, discovery; swipes {found['swipes found']}, matches {found['matches found']}, "
          f"messages {found['messages found']}, duplicates 0; retried {found['retried']}; "
          f"{time.monotonic() - started:.0f} s")


def test_a_consumer_added_later_replays_each_stream_from_its_start(cluster):
    wait_for("every event delivered", lambda: everything_delivered(cluster), timeout=90, interval=0.5)

    async def replay(js, producer):
        stream = f"KINDRED_{producer.upper()}"
        durable = f"late-{os.getpid()}-{producer}"
        stored = (await js.stream_info(stream)).state.messages
        subscription = await js.pull_subscribe(f"kindred.{producer}.>", durable=durable, stream=stream)
        ids, sequences = set(), []
        # Until the new consumer has handed out as many messages as the stream holds: a fetch that hears nothing
        # in time (a loaded machine: nats-py raises the builtin TimeoutError then, NATS's own when the server
        # says there is nothing) is tried again, not taken for the end.
        deadline = time.monotonic() + 60
        while len(sequences) < stored and time.monotonic() < deadline:
            try:
                batch = await subscription.fetch(200, timeout=2)
            except TimeoutError:
                continue
            for message in batch:
                ids.add(message.headers["Nats-Msg-Id"])
                sequences.append(message.metadata.sequence.stream)
                await message.ack()
        await js.delete_consumer(stream, durable)
        return ids, sequences

    replayed = {}
    for producer in PRODUCERS:
        ids, sequences = on_jetstream(cluster, lambda js, producer=producer: replay(js, producer))
        replayed[producer] = len(ids)
        assert not sequences or (sequences[0] == 1 and sequences == sorted(sequences)), producer
        assert ids == outbox_event_ids(cluster, producer), f"{producer}: the stream and the outbox differ"
        assert len(ids) == len(sequences), f"{producer}: an event stored twice in the stream"
    # The flows above made profile, match and chat events (auth's are about deactivations and deletions).
    assert all(replayed[producer] > 0 for producer in ("profile", "match", "chat")), replayed
    print(f"\nreplayed from the start: {replayed}")


def test_a_killed_nats_node_comes_back_and_the_cluster_stops_cleanly(cluster):
    # The fixture's teardown checks the clean stop; here: every node answers again.
    for node in range(3):
        wait_for(f"nats-{node} listening", lambda node=node: socket.create_connection(
            ("127.0.0.1", cluster.base + 310 + node), timeout=2).close() or True, timeout=30)
