"""The visibility policy as a matrix, end to end through the public gateway (Python grpcio, one cluster started by
services/run-cluster.sh, every service real).

For every relation state between a fresh viewer and a fresh member (none, liked, passed, passed-on, reported,
matched, connected, unmatched either way, blocked, blocked-by, deactivated, deleted, ineligible, other community,
outside preferences) and every public RPC that reveals or touches another member (GetProfile, SearchMembers,
GetDeck, GetHome, ListLikesReceived, ListMatches, ListThreads, History, MarkRead, SendMessage, Swipe, ReportUser,
Block), the answer — status code AND message, or presence in the list — is what POLICY says for the state's
relation. POLICY is the table of services/README.md ("What a member may see of, and do to, another member"),
written once here; every expectation is generated from it. Then the secrecy rules are checked on the answers
themselves: the side that was blocked, the blocker and either side of an unmatch get identical answers; a pass
on the viewer changes nothing but the deck; a report changes nothing.

Each state has its own pair, a degree of latitude (111 km) away from every other pair, in a mutual community
the test creates (no photos required, radius 25 km), so each viewer's deck and search can only ever hold their
own member; the one-way state (connected) uses the fitness preset."""
import concurrent.futures
import uuid

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_verify, unique
from test_consent import eventually, pending_deliveries
from test_profile import fields

from kindred.api.v1 import (account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc, chat_pb2,  # noqa: E402
                            chat_pb2_grpc, deck_pb2, deck_pb2_grpc, home_pb2, home_pb2_grpc, match_pb2,
                            match_pb2_grpc, profile_pb2, profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2, community_pb2  # noqa: E402

BOOTSTRAP_SECRET = "policy-matrix-bootstrap-secret-0123456789abcdef"
LIKE, PASS = common_pb2.SWIPE_ACTION_LIKE, common_pb2.SWIPE_ACTION_PASS
OK, NOT_FOUND = grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND

# ---- the table (VisibilityPolicy in Sources/KindredServiceKit/Policy, services/README.md) ----

SHOWN = {"card", "search", "swipe", "report", "block"}
TOGETHER = SHOWN | {"thread", "message", "matches"}
APART = {"report", "block"}
POLICY = {
    "none": SHOWN | {"deck", "likes"},
    "reported": SHOWN | {"deck", "likes"},
    "liked": SHOWN,
    "passed": SHOWN,
    "passed-on": SHOWN,
    "matched": TOGETHER,
    "connected": TOGETHER | {"likes"},
    "unmatched": APART,
    "blocked": APART,
    "blocked-by": APART,
    "deactivated": APART,
    "ineligible": APART,
    "outside-preferences": APART,
    "deleted": set(),
    "other-community": set(),
}

# What a refusal looks like: exactly as an unknown member or thread.
REFUSED = {"card": (NOT_FOUND, "No such member"), "thread": (NOT_FOUND, "No such thread"),
           "message": (NOT_FOUND, "No such thread"), "swipe": (NOT_FOUND, "No such user"),
           "report": (NOT_FOUND, "No such user"), "block": (NOT_FOUND, "No such user")}

# Each RPC: which permission of the table it asks for, and whether it is a list (presence) or a call (answer).
RPCS = {
    "GetProfile": ("card", "call"), "SearchMembers": ("search", "list"), "GetDeck": ("deck", "list"),
    "GetHome": ("home", "list"), "ListLikesReceived": ("likes", "list"), "ListMatches": ("matches", "list"),
    "ListThreads": ("thread", "list"), "History": ("thread", "call"), "MarkRead": ("thread", "call"),
    "SendMessage": ("message", "call"), "Swipe": ("swipe", "call"), "ReportUser": ("report", "call"),
    "Block": ("block", "call"),
}
THREAD_RPCS = {"History", "MarkRead", "SendMessage"}


class State:
    """A relation state: its relation in the table, how to build it, and what the pair holds besides."""

    def __init__(self, name, relation, steps=(), member_liked=False, thread=False, community="policy",
                 member_community=None, viewer_swipe=LIKE, member_fields=None):
        self.name, self.relation, self.steps = name, relation, steps
        self.member_liked, self.thread = member_liked, thread
        self.community, self.member_community = community, member_community or community
        self.viewer_swipe, self.member_fields = viewer_swipe, member_fields


def later_fields(name):
    """A member whose age range leaves the viewers (born 1991) out."""
    chosen = fields(name)
    chosen.age_min_years, chosen.age_max_years = 60, 80
    return chosen


MATCHED = ("member likes", "viewer likes", "member says hi")
STATES = [
    State("none", "none"),
    State("liked-by", "none", ("member likes",), member_liked=True),
    State("liked", "liked", ("viewer likes",)),
    State("passed", "passed", ("viewer passes",), viewer_swipe=PASS),
    State("passed-on", "passed-on", ("member passes",)),
    State("liked-then-passed-on", "liked", ("viewer likes", "member passes")),
    State("reported", "reported", ("viewer reports", "member reports")),
    State("matched", "matched", MATCHED, member_liked=True, thread=True),
    State("connected", "connected", ("viewer likes", "member says hi"), thread=True, community="fitness"),
    State("unmatched", "unmatched", MATCHED + ("member unmatches",), member_liked=True, thread=True),
    State("unmatched-by-viewer", "unmatched", MATCHED + ("viewer unmatches",), member_liked=True, thread=True),
    State("blocked", "blocked", MATCHED + ("viewer blocks",), member_liked=True, thread=True),
    State("blocked-by", "blocked-by", MATCHED + ("member blocks",), member_liked=True, thread=True),
    State("deactivated", "deactivated", MATCHED + ("admin deactivates member",), member_liked=True, thread=True),
    State("deleted", "deleted", ("member likes", "member deletes account"), member_liked=True),
    State("ineligible", "ineligible", ("member likes", "member pauses"), member_liked=True),
    State("other-community", "other-community", member_community="fitness"),
    State("outside-preferences", "outside-preferences", member_fields=later_fields),
]

# Cells the services do not enforce yet, each with the reason (the rest of the matrix must hold).
PENDING = {}

# The secrecy rules, on the answers themselves: these states must answer alike, RPC by RPC (but the listed ones).
ALIKE = [
    ("unmatched", "blocked-by", ()), ("unmatched", "unmatched-by-viewer", ()), ("unmatched", "blocked", ()),
    ("none", "passed-on", ("GetDeck", "GetHome")), ("liked", "liked-then-passed-on", ()), ("none", "reported", ()),
]


def expectation(state, rpc):
    """What the table says `rpc` answers the viewer about the member in `state`: True/False for presence in a
    list, (code, message) for a call (message None: any, for OK)."""
    permission, kind = RPCS[rpc]
    allowed = POLICY[state.relation]
    if kind == "list":
        if permission == "home":
            return "deck" in allowed or "matches" in allowed
        if permission == "likes":
            return "likes" in allowed and state.member_liked
        if permission == "thread":
            return "thread" in allowed and state.thread
        return permission in allowed
    return (OK, None) if permission in allowed else REFUSED[permission]


# ---- the cluster and its members ----

@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET, KINDRED_DISCOVERY_VIEWER_RATE="1000",
                      KINDRED_DISCOVERY_VIEWER_BURST="1000")
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


class Api:
    def __init__(self, channel):
        self.accounts = account_pb2_grpc.AccountServiceStub(channel)
        self.profiles = profile_pb2_grpc.ProfileServiceStub(channel)
        self.deck = deck_pb2_grpc.DeckServiceStub(channel)
        self.matches = match_pb2_grpc.MatchServiceStub(channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.home = home_pb2_grpc.HomeServiceStub(channel)


class Member:
    def __init__(self, cluster, api, community, name, latitude, longitude, profile_fields=None):
        self.email, self.username, self.community = f"{unique('pm-')}@example.com", unique("pm_"), community
        sign_up_and_verify(cluster, api.accounts, community, self.email, self.username)
        self.sign_in(api)
        self.id = api.profiles.CreateProfile(profile_pb2.CreateProfileRequest(
            fields=profile_fields or fields(name), idempotency_key=str(uuid.uuid4())), metadata=self.auth,
            timeout=TIMEOUT).profile.user_id
        api.profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(
            location=common_pb2.GeoPoint(latitude_deg=latitude, longitude_deg=longitude)), metadata=self.auth,
            timeout=TIMEOUT)

    def sign_in(self, api):
        signed = api.accounts.SignIn(account_pb2.SignInRequest(community_id=self.community, login=self.email,
                                                               password=PASSWORD), timeout=TIMEOUT)
        self.auth = bearer(signed.tokens.access_token)


def answer(call):
    """(code, message) of a call."""
    try:
        call()
    except grpc.RpcError as error:
        return error.code(), error.details()
    return OK, None


class Pair:
    """A state's viewer and member, and what building the state left (the thread, the member's message)."""

    def __init__(self, state, viewer, member):
        self.state, self.viewer, self.member = state, viewer, member
        self.thread = self.message = None

    def swipe(self, api, who, whom, action):
        response = api.deck.Swipe(deck_pb2.SwipeRequest(target_user_id=whom.id, action=action), metadata=who.auth,
                                  timeout=TIMEOUT)
        if response.match.match_id:
            self.thread = response.match.match_id

    def run(self, api, admin, step):
        viewer, member = self.viewer, self.member
        if step == "viewer likes":
            self.swipe(api, viewer, member, LIKE)
        elif step == "viewer passes":
            self.swipe(api, viewer, member, PASS)
        elif step == "member likes":
            self.swipe(api, member, viewer, LIKE)
        elif step == "member passes":
            self.swipe(api, member, viewer, PASS)
        elif step in ("viewer reports", "member reports"):
            who, whom = (viewer, member) if step == "viewer reports" else (member, viewer)
            api.matches.ReportUser(match_pb2.ReportUserRequest(target_user_id=whom.id, reason=common_pb2.REPORT_REASON_SPAM),
                                   metadata=who.auth, timeout=TIMEOUT)
        elif step == "member says hi":
            # The thread opens when chat has the match (the first message is retried until then).
            self.message = eventually(lambda: self.say_hi(api), "the match's thread open in chat").message_id
        elif step in ("viewer unmatches", "member unmatches"):
            who = viewer if step == "viewer unmatches" else member
            api.matches.Unmatch(match_pb2.UnmatchRequest(match_id=self.thread), metadata=who.auth, timeout=TIMEOUT)
        elif step in ("viewer blocks", "member blocks"):
            who, whom = (viewer, member) if step == "viewer blocks" else (member, viewer)
            api.matches.Block(match_pb2.BlockRequest(target_user_id=whom.id), metadata=who.auth, timeout=TIMEOUT)
        elif step == "admin deactivates member":
            api.admin.DeactivateAccount(admin_pb2.DeactivateAccountRequest(user_id=member.id, note="policy matrix"),
                                        metadata=admin.auth, timeout=TIMEOUT)
        elif step == "member deletes account":
            api.accounts.DeleteAccount(account_pb2.DeleteAccountRequest(current_password=PASSWORD),
                                       metadata=member.auth, timeout=TIMEOUT)
        elif step == "member pauses":
            api.profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
                fields=types_pb2.ProfileFields(paused=True), update_paths=["paused"]), metadata=member.auth,
                timeout=TIMEOUT)
        else:
            raise AssertionError(step)

    def say_hi(self, api):
        try:
            return api.chat.SendMessage(chat_pb2.SendMessageRequest(
                thread_id=self.thread, client_message_id=f"hi-{self.member.id}", body="hi"),
                metadata=self.member.auth, timeout=TIMEOUT).message
        except grpc.RpcError as error:
            if error.code() == NOT_FOUND:
                return None
            raise

    # ---- what the viewer gets ----

    def observe(self, api, rpc):
        viewer, member, thread = self.viewer, self.member, self.thread
        if rpc == "GetProfile":
            return answer(lambda: api.profiles.GetProfile(profile_pb2.GetProfileRequest(user_id=member.id),
                                                          metadata=viewer.auth, timeout=TIMEOUT))
        if rpc == "SearchMembers":
            found = api.deck.SearchMembers(deck_pb2.SearchMembersRequest(page_size=50), metadata=viewer.auth,
                                           timeout=TIMEOUT).cards
            return member.id in {card.profile.user_id for card in found}
        if rpc == "GetDeck":
            found = api.deck.GetDeck(deck_pb2.GetDeckRequest(page_size=50), metadata=viewer.auth, timeout=TIMEOUT).cards
            return member.id in {card.profile.user_id for card in found}
        if rpc == "GetHome":
            home = api.home.GetHome(home_pb2.GetHomeRequest(), metadata=viewer.auth, timeout=TIMEOUT)
            assert not {"deck", "matches"} & set(home.unavailable_parts), home.unavailable_parts
            return member.id in [card.profile.user_id for card in home.deck] + [m.profile.user_id for m in home.matches]
        if rpc == "ListLikesReceived":
            likes = api.matches.ListLikesReceived(match_pb2.ListLikesReceivedRequest(), metadata=viewer.auth,
                                                  timeout=TIMEOUT).likes
            return member.id in {like.user_id for like in likes}
        if rpc == "ListMatches":
            listed = api.matches.ListMatches(match_pb2.ListMatchesRequest(), metadata=viewer.auth, timeout=TIMEOUT)
            return member.id in {m.profile.user_id for m in listed.matches}
        if rpc == "ListThreads":
            threads = api.chat.ListThreads(chat_pb2.ListThreadsRequest(), metadata=viewer.auth, timeout=TIMEOUT)
            return member.id in {t.other_user_id for t in threads.threads}
        if rpc == "History":
            return answer(lambda: api.chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=viewer.auth,
                                                   timeout=TIMEOUT))
        if rpc == "MarkRead":
            return answer(lambda: api.chat.MarkRead(chat_pb2.MarkReadRequest(
                thread_id=thread, up_to_message_id=self.message), metadata=viewer.auth, timeout=TIMEOUT))
        if rpc == "SendMessage":
            return answer(lambda: api.chat.SendMessage(chat_pb2.SendMessageRequest(
                thread_id=thread, client_message_id=str(uuid.uuid4()), body="hello?"), metadata=viewer.auth,
                timeout=TIMEOUT))
        if rpc == "Swipe":
            return answer(lambda: api.deck.Swipe(deck_pb2.SwipeRequest(
                target_user_id=member.id, action=self.state.viewer_swipe), metadata=viewer.auth, timeout=TIMEOUT))
        if rpc == "ReportUser":
            return answer(lambda: api.matches.ReportUser(match_pb2.ReportUserRequest(
                target_user_id=member.id, reason=common_pb2.REPORT_REASON_OTHER, details="policy matrix"),
                metadata=viewer.auth, timeout=TIMEOUT))
        if rpc == "Block":
            return answer(lambda: api.matches.Block(match_pb2.BlockRequest(target_user_id=member.id),
                                                    metadata=viewer.auth, timeout=TIMEOUT))
        raise AssertionError(rpc)

    def observe_all(self, api):
        """Every RPC of the matrix in order: the reads first, then the calls that change something (a swipe, a
        report, a block last: they may change the relation)."""
        return {rpc: self.observe(api, rpc) for rpc in RPCS
                if rpc not in THREAD_RPCS or self.state.thread}


def settle(cluster):
    """Every event produced so far applied by every consumer (profile's cards, discovery, match, chat)."""
    eventually(lambda: pending_deliveries(cluster) == 0, "every event delivered")


@pytest.fixture(scope="module")
def matrix(cluster):
    """Builds every state's pair (in parallel), then observes every RPC for each: state name -> rpc -> answer."""
    with grpc.insecure_channel(cluster.gateway) as channel, concurrent.futures.ThreadPoolExecutor(8) as pool:
        api = Api(channel)
        admin = Member(cluster, api, "fitness", "Mod", -30.0, -60.0)
        api.admin.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET,
                                                                 community_id="fitness", login=admin.email),
                                 timeout=TIMEOUT)
        admin.sign_in(api)
        community = unique("pm")
        api.admin.CreateCommunity(admin_pb2.CreateCommunityRequest(
            community_id=community, display_name="Policy matrix", settings=community_pb2.CommunitySettings(
                mode=common_pb2.COMMUNITY_MODE_MUTUAL, min_photos=0, max_photos=6, min_age_years=18,
                default_radius_km=25, max_radius_km=25, sign_up_open=True)),
            metadata=admin.auth, timeout=TIMEOUT)
        # Zero photos is the contract's "default" on create (1); set explicitly it means none.
        api.admin.UpdateCommunity(admin_pb2.UpdateCommunityRequest(
            community_id=community, settings=community_pb2.CommunitySettings(min_photos=0),
            update_paths=["settings.min_photos"]), metadata=admin.auth, timeout=TIMEOUT)

        def pair(index, state):
            latitude, longitude = 20.0 + index, 2.0 + index
            viewer_community = community if state.community == "policy" else state.community
            member_community = community if state.member_community == "policy" else state.member_community
            viewer = Member(cluster, api, viewer_community, "Vi", latitude, longitude)
            member = Member(cluster, api, member_community, "Mo", latitude, longitude + 0.01,
                            state.member_fields and state.member_fields("Mo"))
            return Pair(state, viewer, member)

        pairs = list(pool.map(lambda item: pair(*item), enumerate(STATES)))
        settle(cluster)
        # The steps in rounds (every pair's first step, then every second...), settling in between: each step
        # builds on the last one's effects everywhere.
        for round_ in range(max(len(state.steps) for state in STATES)):
            list(pool.map(lambda p: p.run(api, admin, p.state.steps[round_]),
                          [p for p in pairs if round_ < len(p.state.steps)]))
            settle(cluster)
        observed = dict(zip((p.state.name for p in pairs), pool.map(lambda p: p.observe_all(api), pairs)))
        yield {p.state.name: p for p in pairs}, observed


@pytest.mark.parametrize("state", STATES, ids=[state.name for state in STATES])
def test_every_rpc_answers_as_the_policy_says(matrix, state):
    pairs, observed = matrix
    answers = observed[state.name]
    wrong = []
    for rpc, got in answers.items():
        if (state.name, rpc) in PENDING:
            continue
        want = expectation(state, rpc)
        if isinstance(want, tuple) and want[1] is None:
            ok = got[0] == OK
        else:
            ok = got == want
        if not ok:
            wrong.append(f"{rpc}: expected {want}, got {got}")
    assert not wrong, f"{state.name} ({state.relation}):\n  " + "\n  ".join(wrong)


@pytest.mark.parametrize("first,second,apart", ALIKE, ids=[f"{a}={b}" for a, b, _ in ALIKE])
def test_blocks_passes_and_reports_cannot_be_told(matrix, first, second, apart):
    _, observed = matrix
    differ = {rpc: (observed[first][rpc], observed[second].get(rpc)) for rpc in observed[first]
              if rpc not in apart and observed[first][rpc] != observed[second].get(rpc)}
    assert not differ, f"{first} and {second} can be told apart: {differ}"
    for rpc in apart:
        assert observed[first][rpc] != observed[second][rpc], f"the table says only {rpc} differs"
