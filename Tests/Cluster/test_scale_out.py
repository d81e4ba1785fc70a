"""Every scale-out part at once: two replicas of the gateway and of every service but discovery
(KINDRED_REPLICAS_<SERVICE>=2), discovery as three geographic shards (--discovery-shards=3) and events on a
three-node NATS JetStream cluster (--nats): cluster_harness's scale-out mode, which KINDRED_TEST_SCALE_OUT=1 also
gives every other cluster test. Each shard follows the bus under its own name (its durable consumers
are its own, shared by nobody), so every consumer, every shard included, applies every event its producers
published. Under a small load through both gateways (the app's channel of test_replicas.py), kill -9 of a NATS node
and of a chat replica and a drain of a match replica fail no call; kill -9 of a discovery shard fails only the decks
it owns while it restarts; and nothing acknowledged is lost or stored twice (acknowledged_writes.py's check)."""
import os
import signal
import time

import pytest

from acknowledged_writes import (BOOTSTRAP_SECRET, Driver, SwipePlan, check_nothing_lost, everything_delivered,
                                 kill_server, members_with_profiles, wait_for)
from cluster_harness import REPLICATED, SCALE_OUT_SHARDS, Cluster, assert_clean_stop
from test_nats import wait_for_every_durable
from test_replicas import app_channel, restarted, transient_calls


MEMBERS = 8


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(scale_out=True, KINDRED_ON_SERVER_EXIT="restart",
                      KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET, KINDRED_CHAT_HEARTBEAT_MS="1000",
                      KINDRED_MATCH_SWIPE_RATE="100000", KINDRED_MATCH_SWIPE_BURST="100000")
    assert len(running.discovery_shards()) == SCALE_OUT_SHARDS
    wait_for_every_durable(running, timeout=120)  # each shard's own among them
    yield running
    assert_clean_stop(running, running.pids())


def test_everything_runs(cluster):
    pids = cluster.pids()
    assert all(name in pids and f"{name}.2" in pids for name in REPLICATED), pids
    assert all(f"discovery_{shard}" in pids for shard in range(1, SCALE_OUT_SHARDS)), pids
    assert all(f"nats-{node}" in pids for node in range(3)), pids


def test_faults_under_load_lose_nothing_and_fail_no_call(cluster):
    started = time.monotonic()
    community, members = members_with_profiles(cluster, MEMBERS)
    plan = SwipePlan(MEMBERS, others=3)
    driver = Driver(cluster.gateway, members, channel=app_channel(cluster))
    swiper = driver.start_load(plan, swipe_pause=0.3)

    driver.progress(20, "before the faults")
    since = time.time()
    node = f"nats-{time.monotonic_ns() % 3}"
    old = cluster.pids()[node]
    os.kill(old, signal.SIGKILL)
    wait_for(f"{node} restarted", lambda: cluster.pids()[node] != old, timeout=30)
    driver.progress(15, f"after kill -9 of {node}")
    old = cluster.pids()["chat.2"]
    os.kill(old, signal.SIGKILL)
    driver.progress(15, "after kill -9 of chat.2")
    restarted(cluster, "chat.2", old)
    old = cluster.pids()["match.2"]
    os.kill(old, signal.SIGTERM)
    driver.progress(15, "after SIGTERM of match.2")
    restarted(cluster, "match.2", old)
    assert transient_calls(driver, since) == [], "a call failed while a NATS node or a replica went away"
    # A shard runs once: the decks it owns fail while it restarts (the app retries), nothing else does.
    since = time.time()
    kill_server(cluster, f"discovery_{SCALE_OUT_SHARDS - 1}")
    driver.progress(15, f"after kill -9 of discovery_{SCALE_OUT_SHARDS - 1}")
    assert {what for what, _ in transient_calls(driver, since)} <= {"GetDeck"}
    swiper.join(120)
    assert not swiper.is_alive(), "the swipe plan did not finish"
    driver.progress(10, "after the last swipe")
    driver.stop_load()
    found = check_nothing_lost(cluster, driver, community, plan,
                               events_delivered=lambda: everything_delivered(cluster))
    print(f"\nscale-out: killed {node}, chat.2, discovery_{SCALE_OUT_SHARDS - 1}, drained match.2; "
          f"swipes {found['swipes found']}, matches {found['matches found']}, "
          f"messages {found['messages found']}, duplicates 0; retried {found['retried']}; "
          f"{time.monotonic() - started:.0f} s")
    driver.channel.close()
