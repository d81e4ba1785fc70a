"""The location protection through every RPC that shows a distance (DESIGN §5), end to end through the gateway with
every service real: an attacker stands on the victim's exact spot and reads the victim's distance from the deck,
top picks, SearchMembers, GetProfile, ListMatches, ListLikesReceived, UndoPass and Home (its deck, top picks and
matches). Every answer must be the one published distance — whole km between the attacker's and the victim's
published positions (each member's precision-6 cell moved by the secret offset of their user id under the
deployment's location key), floor 1 km — so no RPC tells the attacker more than the deck does. The expected number
is computed here, independently, from the key run-cluster.sh generated (`secrets/location`)."""
import hashlib
import hmac
import math
import struct
import uuid

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import TIMEOUT
from test_profile import fields, signed_up

from kindred.api.v1 import (deck_pb2, deck_pb2_grpc, home_pb2, home_pb2_grpc, match_pb2, match_pb2_grpc,  # noqa: E402
                            profile_pb2, profile_pb2_grpc)
from kindred.common.v1 import common_pb2  # noqa: E402

EARTH_RADIUS_KM = 6371.0088
BASE32 = "0123456789bcdefghjkmnpqrstuvwxyz"
VICTIM_SPOT = (48.85660, 2.35220)  # Paris


def geohash(latitude, longitude, precision):
    latitudes, longitudes, bits, cell = [-90.0, 90.0], [-180.0, 180.0], [], ""
    while len(cell) < precision:
        span, value = (longitudes, longitude) if len(bits) % 2 == 0 else (latitudes, latitude)
        middle = (span[0] + span[1]) / 2
        if value >= middle:
            bits.append(1)
            span[0] = middle
        else:
            bits.append(0)
            span[1] = middle
        if len(bits) % 5 == 0:
            cell += BASE32[int("".join(map(str, bits[-5:])), 2)]
    return cell


def centre(cell):
    latitudes, longitudes, even = [-90.0, 90.0], [-180.0, 180.0], True
    for char in cell:
        value = BASE32.index(char)
        for shift in range(4, -1, -1):
            span = longitudes if even else latitudes
            middle = (span[0] + span[1]) / 2
            span[0 if value >> shift & 1 else 1] = middle
            even = not even
    return (latitudes[0] + latitudes[1]) / 2, (longitudes[0] + longitudes[1]) / 2


def published(key, user_id, latitude, longitude):
    """Where the member whose own spot is (latitude, longitude) is published (LocationOffset)."""
    lat, lon = centre(geohash(latitude, longitude, 6))
    code = hmac.new(key, b"kindred.discovery.location-offset.v1" + uuid.UUID(user_id).bytes, hashlib.sha256).digest()
    unit = lambda part: (struct.unpack(">Q", part)[0] >> 11) / float(1 << 53)  # noqa: E731
    bearing, length = unit(code[0:8]) * 2 * math.pi, 2.4 + unit(code[8:16]) * (3.0 - 2.4)
    per_degree = EARTH_RADIUS_KM * math.pi / 180
    moved_lat = min(89.99, max(-89.99, lat + length * math.cos(bearing) / per_degree))
    moved_lon = lon + length * math.sin(bearing) / (per_degree * max(0.01, math.cos(lat * math.pi / 180)))
    moved_lon = moved_lon - 360 if moved_lon >= 180 else moved_lon + 360 if moved_lon < -180 else moved_lon
    return centre(geohash(moved_lat, moved_lon, 6))


def shown_km(a, b):
    """Whole km between two published positions, floor 1 (PublishedLocation.kilometres)."""
    (lat1, lon1), (lat2, lon2) = a, b
    r = math.pi / 180
    cosine = (math.sin(lat1 * r) * math.sin(lat2 * r)
              + math.cos(lat1 * r) * math.cos(lat2 * r) * math.cos(lon2 * r - lon1 * r))
    return max(1, math.floor(EARTH_RADIUS_KM * math.acos(min(1, max(-1, cosine))) + 0.5))  # Swift's .rounded()


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_DISCOVERY_VIEWER_RATE="1000", KINDRED_DISCOVERY_VIEWER_BURST="1000")
    assert {"profile", "discovery", "match"} <= set(running.servers())
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


class Member:
    def __init__(self, cluster, channel, name, spot):
        _, self.auth = signed_up(cluster, channel, "fitness")
        profiles = profile_pb2_grpc.ProfileServiceStub(channel)
        self.id = profiles.CreateProfile(profile_pb2.CreateProfileRequest(
            fields=fields(name), idempotency_key=str(uuid.uuid4())), metadata=self.auth, timeout=TIMEOUT).profile.user_id
        profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(
            location=common_pb2.GeoPoint(latitude_deg=spot[0], longitude_deg=spot[1])), metadata=self.auth,
            timeout=TIMEOUT)
        self.spot = spot


def distances_shown(channel, attacker, victim):
    """Every distance of `victim` that `attacker` can read, by RPC (None: the RPC did not show the victim)."""
    deck = deck_pb2_grpc.DeckServiceStub(channel)
    matches = match_pb2_grpc.MatchServiceStub(channel)
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)

    def card_of(items):  # DeckCard, MatchSummary and ReceivedLike all carry the card as `profile`
        found = [item.profile for item in items if item.profile.user_id == victim.id]
        return found[0].distance_km if found else None

    shown = {
        "GetDeck": card_of(deck.GetDeck(deck_pb2.GetDeckRequest(page_size=50), metadata=attacker.auth,
                                        timeout=TIMEOUT).cards),
        "GetRecommendations": card_of(deck.GetRecommendations(deck_pb2.GetRecommendationsRequest(limit=10),
                                                              metadata=attacker.auth, timeout=TIMEOUT).cards),
        "SearchMembers": card_of(deck.SearchMembers(deck_pb2.SearchMembersRequest(page_size=50),
                                                    metadata=attacker.auth, timeout=TIMEOUT).cards),
        "GetProfile": profiles.GetProfile(profile_pb2.GetProfileRequest(user_id=victim.id), metadata=attacker.auth,
                                          timeout=TIMEOUT).profile.distance_km,
        "ListMatches": card_of(matches.ListMatches(match_pb2.ListMatchesRequest(), metadata=attacker.auth,
                                                   timeout=TIMEOUT).matches),
        "ListLikesReceived": card_of(matches.ListLikesReceived(match_pb2.ListLikesReceivedRequest(),
                                                               metadata=attacker.auth, timeout=TIMEOUT).likes),
    }
    home = home_pb2_grpc.HomeServiceStub(channel).GetHome(home_pb2.GetHomeRequest(deck_page_size=20),
                                                           metadata=attacker.auth, timeout=TIMEOUT)
    assert not home.unavailable_parts, home.unavailable_parts
    shown["GetHome deck"] = card_of(home.deck)
    shown["GetHome top_picks"] = card_of(home.top_picks)
    shown["GetHome matches"] = card_of(home.matches)
    # Last: the pass takes the victim out of the attacker's deck and likes until it is undone.
    passed = deck.Swipe(deck_pb2.SwipeRequest(target_user_id=victim.id, action=common_pb2.SWIPE_ACTION_PASS),
                        metadata=attacker.auth, timeout=TIMEOUT)
    undone = deck.UndoPass(deck_pb2.UndoPassRequest(swipe_id=passed.swipe_id), metadata=attacker.auth,
                           timeout=TIMEOUT)
    shown["UndoPass"] = undone.card.profile.distance_km if undone.card.profile.user_id == victim.id else None
    return shown


def test_standing_on_the_victims_spot_every_rpc_shows_the_one_published_distance(cluster):
    key = (cluster.data_dir / "secrets" / "location").read_text().strip().encode()
    with grpc.insecure_channel(cluster.gateway) as channel:
        # Victims until one is published at least 2 km from where the attacker will be (so a distance between the
        # real cells, 1 km on the same spot, cannot pass for the published one); almost always the first.
        for attempt in range(5):
            attacker = Member(cluster, channel, "Eve", VICTIM_SPOT)
            victim = Member(cluster, channel, "Vic", VICTIM_SPOT)
            expected = shown_km(published(key, attacker.id, *attacker.spot), published(key, victim.id, *victim.spot))
            if expected >= 2:
                break
        assert expected >= 2, "five pairs published within 1.5 km of each other"
        # The victim follows the attacker: the attacker now has the victim among matches (a connection) and
        # likes received as well as in deck, picks and search.
        followed = deck_pb2_grpc.DeckServiceStub(channel).Swipe(deck_pb2.SwipeRequest(
            target_user_id=attacker.id, action=common_pb2.SWIPE_ACTION_LIKE), metadata=victim.auth, timeout=TIMEOUT)
        assert followed.outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED
        shown = distances_shown(channel, attacker, victim)
        # Top picks are the best few of the deck: the victim may rank below them (not shown is no distance).
        optional = {"GetRecommendations", "GetHome top_picks"}
        assert {name: km for name, km in shown.items() if km is not None or name not in optional} == {
            name: expected for name in shown if shown[name] is not None or name not in optional}, (expected, shown)
        # Both sides of a pair see the same number.
        back = profile_pb2_grpc.ProfileServiceStub(channel).GetProfile(
            profile_pb2.GetProfileRequest(user_id=attacker.id), metadata=victim.auth, timeout=TIMEOUT).profile
        assert back.distance_km == expected
