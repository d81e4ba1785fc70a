"""Read-your-writes across services (DESIGN §6), end to end through the gateway with every service real: once a
write has answered, the next call of either party that depends on it works, with no sleep and no retry.

- A like that makes a match (mutual community) or a connection (fitness, one-way) answers only once chat has opened
  the thread: the first SendMessage on it, by the swiper and by the other side, right after the Swipe answer.
- CreateProfile, UpdateLocation and UploadPhoto answer only once discovery and match have them: a new member's
  GetDeck right after (also right after the photo that completes the profile), and a swipe between two members who
  just finished their profiles, work at once.

Each is repeated (20 pairs): without the waits the relays' delivery races the next call and some of them fail."""
import uuid

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_sign_in, unique
from test_profile import fields, upload, webp

from kindred.api.v1 import (account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc, chat_pb2,  # noqa: E402
                            chat_pb2_grpc, deck_pb2, deck_pb2_grpc, profile_pb2, profile_pb2_grpc)
from kindred.common.v1 import common_pb2, community_pb2  # noqa: E402

BOOTSTRAP_SECRET = "read-your-writes-bootstrap-secret-0123456789abcdef"
PAIRS = 20
LIKE = common_pb2.SWIPE_ACTION_LIKE


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET, KINDRED_DISCOVERY_VIEWER_RATE="1000",
                      KINDRED_DISCOVERY_VIEWER_BURST="1000")
    assert {"profile", "discovery", "match", "chat"} <= set(running.servers())
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
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)


@pytest.fixture(scope="module")
def api(channel):
    return Api(channel)


def signed_in(cluster, api, community):
    signed = sign_up_and_sign_in(cluster, api.accounts, community, "ryw")
    return signed.account.email, bearer(signed.tokens.access_token)


@pytest.fixture(scope="module")
def admin(cluster, api):
    email, _ = signed_in(cluster, api, "fitness")
    api.admin.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET,
                                                             community_id="fitness", login=email), timeout=TIMEOUT)
    return bearer(api.accounts.SignIn(account_pb2.SignInRequest(community_id="fitness", login=email,
                                                                password=PASSWORD), timeout=TIMEOUT).tokens.access_token)


def new_community(api, admin):
    """A mutual community of the test's own (one photo required, CreateCommunity's default)."""
    community = unique("ryw-")
    api.admin.CreateCommunity(admin_pb2.CreateCommunityRequest(
        community_id=community, display_name="Read your writes", settings=community_pb2.CommunitySettings(
            mode=common_pb2.COMMUNITY_MODE_MUTUAL, default_radius_km=50, max_radius_km=100,
            daily_like_limit=1000)), metadata=admin, timeout=TIMEOUT)
    return community


@pytest.fixture(scope="module")
def mutual(api, admin):
    """A mutual community that needs no photos (so profiles complete with fields and a place)."""
    community = new_community(api, admin)
    # CreateCommunity reads 0 photos as the default (1); an update sets 0.
    api.admin.UpdateCommunity(admin_pb2.UpdateCommunityRequest(
        community_id=community, settings=community_pb2.CommunitySettings(min_photos=0),
        update_paths=["settings.min_photos"]), metadata=admin, timeout=TIMEOUT)
    return community


class Member:
    """Signed up, with a complete profile at a place: each write answered before the next call."""

    def __init__(self, cluster, api, community, name, latitude=48.8566, longitude=2.3522):
        _, self.auth = signed_in(cluster, api, community)
        self.id = api.profiles.CreateProfile(profile_pb2.CreateProfileRequest(
            fields=fields(name), idempotency_key=str(uuid.uuid4())), metadata=self.auth,
            timeout=TIMEOUT).profile.user_id
        api.profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(
            location=common_pb2.GeoPoint(latitude_deg=latitude, longitude_deg=longitude)), metadata=self.auth,
            timeout=TIMEOUT)


def outcome(call):
    """OK, or the status code and message of a failed call."""
    try:
        call()
    except grpc.RpcError as error:
        return f"{error.code().name} {error.details()}"
    return "OK"


def say_hi(api, sender, thread):
    return lambda: api.chat.SendMessage(chat_pb2.SendMessageRequest(
        thread_id=thread, client_message_id=str(uuid.uuid4()), body="hi"), metadata=sender.auth, timeout=TIMEOUT)


def like(api, swiper, target):
    return api.deck.Swipe(deck_pb2.SwipeRequest(target_user_id=target.id, action=LIKE), metadata=swiper.auth,
                          timeout=TIMEOUT)


def test_a_match_takes_the_first_message_of_either_side_at_once(cluster, api, mutual):
    failures = []
    for pair in range(PAIRS):
        first, second = Member(cluster, api, mutual, "Ann"), Member(cluster, api, mutual, "Ben")
        assert like(api, first, second).outcome == deck_pb2.SWIPE_OUTCOME_RECORDED
        matched = like(api, second, first)
        assert matched.outcome == deck_pb2.SWIPE_OUTCOME_MATCHED
        # The swiper who completed the match and the other side, each at once; alternating who goes first.
        senders = (second, first) if pair % 2 == 0 else (first, second)
        for sender in senders:
            result = outcome(say_hi(api, sender, matched.match.match_id))
            if result != "OK":
                failures.append((pair, "swiper" if sender is second else "other side", result))
    assert not failures, f"{len(failures)} of {2 * PAIRS} first messages failed: {failures[:5]}"


def test_a_follow_takes_the_first_message_of_either_side_at_once(cluster, api):
    failures = []
    for pair in range(PAIRS):
        follower, followed = Member(cluster, api, "fitness", "Cat"), Member(cluster, api, "fitness", "Dan")
        connected = like(api, follower, followed)
        assert connected.outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED
        senders = (follower, followed) if pair % 2 == 0 else (followed, follower)
        for sender in senders:
            result = outcome(say_hi(api, sender, connected.match.match_id))
            if result != "OK":
                failures.append((pair, "follower" if sender is follower else "followed", result))
    assert not failures, f"{len(failures)} of {2 * PAIRS} first messages failed: {failures[:5]}"


def test_new_profiles_can_see_their_deck_and_swipe_at_once(cluster, api, mutual):
    failures = []
    for pair in range(PAIRS):
        first = Member(cluster, api, mutual, "Eve", 52.52, 13.405)
        result = outcome(lambda: api.deck.GetDeck(deck_pb2.GetDeckRequest(page_size=10), metadata=first.auth,
                                                  timeout=TIMEOUT))
        if result != "OK":
            failures.append((pair, "GetDeck", result))
        second = Member(cluster, api, mutual, "Fay", 52.53, 13.41)
        result = outcome(lambda: like(api, second, first))
        if result != "OK":
            failures.append((pair, "Swipe", result))
    assert not failures, f"{len(failures)} of {2 * PAIRS} calls failed: {failures[:5]}"


def test_the_photo_that_completes_a_profile_shows_it_at_once(cluster, api, admin):
    community, failures, photo = new_community(api, admin), [], webp()
    for member in range(PAIRS // 2):
        viewer = Member(cluster, api, community, "Gus")  # one photo short of complete
        upload(api.profiles, viewer.auth, photo, "image/webp")
        result = outcome(lambda: api.deck.GetDeck(deck_pb2.GetDeckRequest(page_size=10), metadata=viewer.auth,
                                                  timeout=TIMEOUT))
        if result != "OK":
            failures.append((member, "GetDeck", result))
    assert not failures, f"{len(failures)} of {PAIRS // 2} calls failed: {failures[:5]}"
