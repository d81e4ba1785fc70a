"""Discovery as three geographic shards (run-cluster.sh --discovery-shards=3), through the gateway: members on both
sides of a boundary between two precision-2 geohash cells owned by different shards see each other in their decks;
each deck is drawn by the shard owning the viewer's cell (its discovery_decks_total counts it); a member who passes
on two others and then moves across the boundary is served by the other shard on the next call, and both passes
still keep them out of the deck: the pass on a member of the new shard's cell (every shard applies every event), and
the pass on a member of the old cell, which the new shard did not keep (a shard keeps only the swipes of the members
it owns) and reads back from its projection when the viewer moves into its cell."""
import re
import time
import urllib.request

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import TIMEOUT
from test_deck import member

from kindred.api.v1 import deck_pb2, deck_pb2_grpc, profile_pb2, profile_pb2_grpc  # noqa: E402
from kindred.common.v1 import common_pb2  # noqa: E402

SHARDS = 3
BASE32 = "0123456789bcdefghjkmnpqrstuvwxyz"
CELL_WIDTH = 360 / 32  # a precision-2 cell's width in degrees (height 5.625°)


def geohash(latitude: float, longitude: float, precision: int = 2) -> str:
    lat, lon, bits, even, text, value, count = [-90.0, 90.0], [-180.0, 180.0], 0, True, "", 0, 0
    while len(text) < precision:
        interval, coordinate = (lon, longitude) if even else (lat, latitude)
        middle = (interval[0] + interval[1]) / 2
        value = value << 1 | (coordinate >= middle)
        interval[0 if coordinate >= middle else 1] = middle
        even, count = not even, count + 1
        if count == 5:
            text, value, count = text + BASE32[value], 0, 0
    return text


def shard_of(latitude: float, longitude: float) -> int:
    """DiscoveryShards' rule, written again: FNV-1a of the precision-2 cell's text, modulo the shard count."""
    value = 2166136261
    for byte in geohash(latitude, longitude).encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value % SHARDS


def boundary(latitude: float = 48.5):
    """A longitude where the cell to the west and the cell to the east belong to different shards, near Paris."""
    k = round((2.35 + 180) / CELL_WIDTH)
    for step in range(16):
        for edge in (k + step, k - step):
            longitude = edge * CELL_WIDTH - 180
            west, east = shard_of(latitude, longitude - 0.5), shard_of(latitude, longitude + 0.5)
            if west != east:
                return longitude, west, east
    raise AssertionError("no boundary between two shards found")


def decks_drawn(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = re.search(r"^discovery_decks_total(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture(scope="module")
def cluster():
    # One location update a second (the move below comes within a minute of the first location).
    running = Cluster(args=("--discovery-shards=3",), KINDRED_PROFILE_LOCATION_INTERVAL_MS="1000")
    pids = running.pids()
    assert {"discovery", "discovery_1", "discovery_2"} <= set(pids), pids
    yield running
    assert_clean_stop(running, pids)


def deck_ids(deck, auth, wanted=None, unwanted=None, deadline=30.0):
    """The caller's first deck page as ids, waiting until it holds `wanted` and not `unwanted` (events travel)."""
    until = time.monotonic() + deadline
    while True:
        try:
            ids = {card.profile.user_id for card in
                   deck.GetDeck(deck_pb2.GetDeckRequest(page_size=50), metadata=auth, timeout=TIMEOUT).cards}
            if (wanted is None or wanted <= ids) and (unwanted is None or not (unwanted & ids)):
                return ids
        except grpc.RpcError as error:  # the viewer's own snapshot may not be indexed yet
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
        assert time.monotonic() < until, f"deck never held {wanted} without {unwanted}"
        time.sleep(0.3)


def test_decks_come_from_the_viewers_shard_and_a_move_keeps_the_exclusions(cluster):
    longitude, west_shard, east_shard = boundary()
    admin = {0: cluster.admin_port("discovery"), 1: cluster.base + 120 + 1, 2: cluster.base + 120 + 2}
    # The viewer ~4.4 km west of the boundary, the others ~8 km east (published positions move up to ~3.7 km).
    west, east = longitude - 0.06, longitude + 0.11
    with grpc.insecure_channel(cluster.gateway) as channel:
        deck = deck_pb2_grpc.DeckServiceStub(channel)
        viewer, viewer_auth = member(cluster, channel, "Vi", 48.5, west)
        located = time.monotonic()
        passed, _ = member(cluster, channel, "Pa", 48.52, east)
        kept, _ = member(cluster, channel, "Ke", 48.48, east)
        # A neighbour ~4.4 km further west, in the viewer's own cell.
        neighbour, _ = member(cluster, channel, "Ne", 48.46, west - 0.06)
        # The viewer's deck holds all three, drawn by the western cell's shard alone.
        before = {shard: decks_drawn(port) for shard, port in admin.items()}
        deck_ids(deck, viewer_auth, wanted={passed, kept, neighbour})
        after = {shard: decks_drawn(port) for shard, port in admin.items()}
        assert after[west_shard] > before[west_shard], (before, after, west_shard)
        assert all(after[s] == before[s] for s in admin if s != west_shard), (before, after, west_shard)

        for target in (passed, neighbour):
            deck.Swipe(deck_pb2.SwipeRequest(target_user_id=target, action=common_pb2.SWIPE_ACTION_PASS),
                       metadata=viewer_auth, timeout=TIMEOUT)
        deck_ids(deck, viewer_auth, wanted={kept}, unwanted={passed, neighbour})

        # The viewer moves ~8.8 km east, into the other shard's cell (profile takes moves up to 1,000 km/h: 32 s):
        # the next deck comes from that shard, and the passes recorded while the viewer was in the west still keep
        # `passed` and `neighbour` out (the eastern shard kept no swipe between two western members: it read the
        # viewer's back when they moved in).
        time.sleep(max(0.0, located + 34 - time.monotonic()))
        profile_pb2_grpc.ProfileServiceStub(channel).UpdateLocation(profile_pb2.UpdateLocationRequest(
            location=common_pb2.GeoPoint(latitude_deg=48.5, longitude_deg=longitude + 0.06)), metadata=viewer_auth,
            timeout=TIMEOUT)
        before = {shard: decks_drawn(port) for shard, port in admin.items()}
        ids = deck_ids(deck, viewer_auth, deadline=0.0)
        after = {shard: decks_drawn(port) for shard, port in admin.items()}
        assert kept in ids and passed not in ids and neighbour not in ids and viewer not in ids, ids
        assert after[east_shard] > before[east_shard], (before, after, east_shard)
        assert all(after[s] == before[s] for s in admin if s != east_shard), (before, after, east_shard)
