"""A swipe is accepted only on a member the swiper's deck could have shown (DESIGN §5), end to end through the
gateway (Python grpcio, one cluster started by services/run-cluster.sh, every service real).

The members are in the fitness community: one-way follows, where an accepted like is a connection (and a message
thread) at once. Sam (28, in Paris) likes a member who wants 50+ only, a member 900 km away, and an unknown id:
each answers NOT_FOUND with the same message, in the same time, and nothing reaches the targets. A member who
passed on Sam is still one his deck could have shown (a pass is never visible to the one passed on): his like
on her is accepted."""
import math
import statistics
import time
import uuid

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import TIMEOUT
from test_profile import signed_up

from kindred.api.v1 import deck_pb2, deck_pb2_grpc, match_pb2, match_pb2_grpc, profile_pb2, profile_pb2_grpc  # noqa: E402
from kindred.api.v1 import types_pb2  # noqa: E402
from kindred.common.v1 import common_pb2  # noqa: E402

LIKE, PASS = common_pb2.SWIPE_ACTION_LIKE, common_pb2.SWIPE_ACTION_PASS
PARIS = (48.8566, 2.3522)


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_DISCOVERY_VIEWER_RATE="1000", KINDRED_DISCOVERY_VIEWER_BURST="1000",
                      KINDRED_MATCH_SWIPE_RATE="1000", KINDRED_MATCH_SWIPE_BURST="1000")
    assert {"profile", "discovery", "match"} <= set(running.servers())
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


def east(km):
    """A point `km` east of Paris (the same latitude)."""
    return PARIS[0], PARIS[1] + km / (111.32 * math.cos(math.radians(PARIS[0])))


class Member:
    def __init__(self, cluster, channel, name, born, where, age_min=0, age_max=0, radius=0):
        _, self.auth = signed_up(cluster, channel, "fitness")
        profiles = profile_pb2_grpc.ProfileServiceStub(channel)
        fields = types_pb2.ProfileFields(display_name=name, birth_date=common_pb2.CalendarDate(year=born, month=3, day=9),
                                         gender=common_pb2.GENDER_MAN, age_min_years=age_min, age_max_years=age_max,
                                         max_distance_km=radius)
        self.id = profiles.CreateProfile(profile_pb2.CreateProfileRequest(
            fields=fields, idempotency_key=str(uuid.uuid4())), metadata=self.auth, timeout=TIMEOUT).profile.user_id
        profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(
            location=common_pb2.GeoPoint(latitude_deg=where[0], longitude_deg=where[1])), metadata=self.auth,
            timeout=TIMEOUT)


def wait_indexed(deck, member, deadline=30.0):
    """Until discovery holds the member (their own deck answers): profile's events travel by the relay."""
    until = time.monotonic() + deadline
    while True:
        try:
            deck.GetDeck(deck_pb2.GetDeckRequest(page_size=1), metadata=member.auth, timeout=TIMEOUT)
            return
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION or time.monotonic() > until:
                raise
        time.sleep(0.2)


def swipe(deck, swiper, target_id, action=LIKE):
    return deck.Swipe(deck_pb2.SwipeRequest(target_user_id=target_id, action=action), metadata=swiper.auth,
                      timeout=TIMEOUT)


def refusal(deck, swiper, target_id, action=LIKE):
    """(code, message) of a swipe that must fail."""
    try:
        swipe(deck, swiper, target_id, action)
    except grpc.RpcError as error:
        return error.code(), error.details()
    raise AssertionError("the swipe was accepted")


def uuid7():
    value = (int(time.time() * 1000) << 80) | (0x7 << 76) | (uuid.uuid4().int & ((1 << 76) - 1))
    return str(uuid.UUID(int=(value & ~(0x3 << 62)) | (0x2 << 62)))


def test_likes_outside_the_targets_preferences_answer_as_an_unknown_member(cluster, channel):
    deck = deck_pb2_grpc.DeckServiceStub(channel)
    matches = match_pb2_grpc.MatchServiceStub(channel)
    sam = Member(cluster, channel, "Sam", 1998, PARIS)  # 28
    fifty_plus = Member(cluster, channel, "Flo", 1970, east(2), age_min=50, age_max=99)
    faraway = Member(cluster, channel, "Fay", 1996, east(900), radius=200)
    passer = Member(cluster, channel, "Pia", 1996, east(3))
    fits = Member(cluster, channel, "Fin", 1996, east(4))
    for member in (sam, fifty_plus, faraway, passer, fits):
        wait_indexed(deck, member)

    unknown = refusal(deck, sam, uuid7())
    assert unknown[0] == grpc.StatusCode.NOT_FOUND
    for target in (fifty_plus, faraway):
        for action in (LIKE, PASS):
            assert refusal(deck, sam, target.id, action) == unknown
    # The same time class: the answers take as long as an unknown id's (interleaved, medians).
    times = {"unknown": [], "outside": []}
    for _ in range(15):
        for kind, target in (("unknown", uuid7()), ("outside", fifty_plus.id)):
            started = time.perf_counter()
            refusal(deck, sam, target)
            times[kind].append(time.perf_counter() - started)
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    print(f"median NOT_FOUND: unknown {medians['unknown'] * 1000:.2f} ms, outside {medians['outside'] * 1000:.2f} ms")
    assert abs(medians["unknown"] - medians["outside"]) < max(0.005, 0.5 * max(medians.values())), medians

    # Nothing reached the targets: no like, no connection.
    for target in (fifty_plus, faraway):
        likes = matches.ListLikesReceived(match_pb2.ListLikesReceivedRequest(), metadata=target.auth, timeout=TIMEOUT)
        assert list(likes.likes) == [] and likes.total_count == 0
        incoming = matches.ListMatches(match_pb2.ListMatchesRequest(), metadata=target.auth, timeout=TIMEOUT)
        assert list(incoming.matches) == []

    # A member who passed on Sam is one his deck could have shown (she is only hidden from it): accepted.
    assert swipe(deck, passer, sam.id, PASS).outcome == deck_pb2.SWIPE_OUTCOME_RECORDED
    assert swipe(deck, sam, passer.id).outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED
    followed = swipe(deck, sam, fits.id)
    assert followed.outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED
    # A retry replays, even after the target changed their preferences (50+ only now): the check never turns a
    # retry into NOT_FOUND.
    profile_pb2_grpc.ProfileServiceStub(channel).UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(age_min_years=50, age_max_years=99),
        update_paths=["age_min_years", "age_max_years"]), metadata=fits.auth, timeout=TIMEOUT)
    until = time.monotonic() + 30
    while fits.id in [card.profile.user_id for card in deck.GetDeck(
            deck_pb2.GetDeckRequest(page_size=50), metadata=passer.auth, timeout=TIMEOUT).cards]:
        assert time.monotonic() < until, "discovery did not learn of the change"
        time.sleep(0.2)
    assert refusal(deck, passer, fits.id) == unknown  # a new like is refused now
    again = swipe(deck, sam, fits.id)
    assert again.replayed and again.swipe_id == followed.swipe_id
