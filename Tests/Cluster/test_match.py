"""The match service through the gateway, as an app and an admin would use it: Python grpcio on the public API
(and the `kindred` CLI), against a whole cluster started by services/run-cluster.sh.

The profile service is not in the cluster yet, so the projections match keeps of it (communities and members)
are fed here the way profile will feed them: DeliverEvents with profile's service token. `ProfileProjection`
is that one place; after the profile merge it becomes CreateProfile/UpdateCommunity calls."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import grpc
import pytest

from cluster_harness import ROOT, Cluster, assert_clean_stop, bin_dir
from test_cluster import sign_up_and_sign_in

# Stubs of the internal contracts the setup helper talks to (match's and discovery's DeliverEvents, auth's
# IssueServiceToken);
# the public API's stubs come from cluster_harness.
_internal = tempfile.mkdtemp(prefix="kindred-match-stubs-")
atexit.register(shutil.rmtree, _internal, ignore_errors=True)  # generated stubs, removed at exit
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={_internal}",
     f"--grpc_python_out={_internal}", *(str(p.relative_to(ROOT / "proto")) for folder in ("kindred/match/v1",
                                                                                           "kindred/auth/v1",
                                                                                           "kindred/discovery/v1")
                                        for p in (ROOT / "proto" / folder).glob("*.proto"))],
    check=True)
sys.path.insert(0, _internal)

from kindred.api.v1 import account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc  # noqa: E402
from kindred.api.v1 import deck_pb2, deck_pb2_grpc, home_pb2, home_pb2_grpc, match_pb2, match_pb2_grpc  # noqa: E402
from kindred.api.v1 import types_pb2  # noqa: E402
from kindred.auth.v1 import auth_pb2_grpc, credentials_pb2  # noqa: E402
from kindred.common.v1 import common_pb2, community_pb2, events_pb2  # noqa: E402
from kindred.discovery.v1 import discovery_pb2_grpc as internal_discovery_grpc  # noqa: E402
from kindred.match.v1 import match_pb2_grpc as internal_match_grpc  # noqa: E402

TIMEOUT = 30
PASSWORD = "correct horse battery staple"
BOOTSTRAP_SECRET = "match-test-bootstrap-secret-0123456789abcdef"
LIKE, PASS = common_pb2.SWIPE_ACTION_LIKE, common_pb2.SWIPE_ACTION_PASS


def bearer(token):
    return [("authorization", f"Bearer {token}")]


def code_of(call):
    try:
        call()
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


class ProfileProjection:
    """Feeds match's and discovery's projections exactly as the profile service will (CommunityUpdated,
    ProfileUpdated through their DeliverEvents, with profile's service token from auth's IssueServiceToken).
    Every member is 30, in one Paris cell, open to everyone: discovery (which match asks before a swipe) lets
    them all swipe on each other."""

    def __init__(self, cluster):
        self.auth = auth_pb2_grpc.AuthServiceStub(grpc.insecure_channel(f"127.0.0.1:{cluster.port('auth')}"))
        self.match = internal_match_grpc.MatchServiceStub(grpc.insecure_channel(f"127.0.0.1:{cluster.port('match')}"))
        # Every discovery shard applies every event (a run with KINDRED_TEST_SCALE_OUT=1 has three).
        self.discoveries = [internal_discovery_grpc.DiscoveryServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{cluster.port(shard)}")) for shard in cluster.discovery_shards()]
        # The profile service's own secret (run-cluster.sh gives auth every service's secret from the data folder).
        self.secret = (cluster.data_dir / "secrets" / "profile").read_text().strip()
        self.versions = {}

    def _deliver(self, event):
        token = self.auth.IssueServiceToken(credentials_pb2.IssueServiceTokenRequest(
            service_name="profile", client_secret=self.secret), timeout=TIMEOUT).access_token
        event.event_id = str(uuid.UUID(int=(int(time.time() * 1000) << 80) | (7 << 76) | (2 << 62)
                                       | uuid.uuid4().int & ((1 << 62) - 1) | (uuid.uuid4().int & 0xFFF) << 64))
        event.producer = "profile"
        for consumer in (self.match, *self.discoveries):
            response = consumer.DeliverEvents(events_pb2.DeliverEventsRequest(events=[event]),
                                              metadata=bearer(token), timeout=TIMEOUT)
            assert list(response.acknowledged_event_ids) == [event.event_id]

    def community(self, community_id, mode=common_pb2.COMMUNITY_MODE_MUTUAL):
        self.versions[community_id] = self.versions.get(community_id, 0) + 1
        settings = community_pb2.CommunitySettings(mode=mode, daily_like_limit=200, undo_window_seconds=300,
                                                   daily_undo_limit=3)
        self._deliver(events_pb2.Event(community_id=community_id, community_updated=events_pb2.CommunityUpdated(
            community=community_pb2.Community(community_id=community_id, settings=settings,
                                              version=self.versions[community_id]))))

    def member(self, user_id, community_id):
        snapshot = events_pb2.CandidateSnapshot(
            user_id=user_id, community_id=community_id, eligible=True, version=1, geohash_cell="u09tvw",
            birth_date=common_pb2.CalendarDate(year=time.gmtime().tm_year - 30, month=1, day=1))
        self._deliver(events_pb2.Event(user_id=user_id, community_id=community_id,
                                       profile_updated=events_pb2.ProfileUpdated(snapshot=snapshot)))


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET)
    assert "match" in running.servers()
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


@pytest.fixture(scope="module")
def api(channel):
    class Api:
        accounts = account_pb2_grpc.AccountServiceStub(channel)
        deck = deck_pb2_grpc.DeckServiceStub(channel)
        matches = match_pb2_grpc.MatchServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        home = home_pb2_grpc.HomeServiceStub(channel)
    return Api


@pytest.fixture(scope="module")
def profiles(cluster):
    return ProfileProjection(cluster)


class User:
    def __init__(self, user_id, token, email, community):
        self.id, self.token, self.email, self.community = user_id, token, email, community

    @property
    def auth(self):
        return bearer(self.token)


def new_user(cluster, api, profiles, community):
    signed = sign_up_and_sign_in(cluster, api.accounts, community)
    profiles.member(signed.account.user_id, community)
    return User(signed.account.user_id, signed.tokens.access_token, signed.account.email, community)


def community(profiles, mode=common_pb2.COMMUNITY_MODE_MUTUAL):
    name = f"c{uuid.uuid4().hex[:8]}"
    profiles.community(name, mode)
    return name


def swipe(api, user, target, action=LIKE):
    return api.deck.Swipe(deck_pb2.SwipeRequest(target_user_id=target.id, action=action), metadata=user.auth,
                          timeout=TIMEOUT)


def matches(api, user):
    return api.matches.ListMatches(match_pb2.ListMatchesRequest(), metadata=user.auth, timeout=TIMEOUT)


def test_two_users_who_like_each_other_see_one_match(cluster, api, profiles):
    dating = community(profiles)
    alice, bob = new_user(cluster, api, profiles, dating), new_user(cluster, api, profiles, dating)
    first = swipe(api, alice, bob)
    assert first.outcome == deck_pb2.SWIPE_OUTCOME_RECORDED and not first.HasField("match")
    likes = api.matches.ListLikesReceived(match_pb2.ListLikesReceivedRequest(), metadata=bob.auth, timeout=TIMEOUT)
    assert [like.user_id for like in likes.likes] == [alice.id] and likes.total_count == 1
    assert "profiles" not in likes.unavailable_parts, "profile answered (these test users have no profile there)"
    second = swipe(api, bob, alice)
    assert second.outcome == deck_pb2.SWIPE_OUTCOME_MATCHED
    for user, other in ((alice, bob), (bob, alice)):
        listed = matches(api, user)
        assert [m.match_id for m in listed.matches] == [second.match.match_id]
        assert listed.matches[0].profile.user_id == other.id
        assert listed.matches[0].direction == types_pb2.CONNECTION_DIRECTION_MUTUAL
        assert list(listed.unavailable_parts) == [], "profile and chat both answered"
        assert listed.matches[0].unread_count == 0
    assert swipe(api, bob, alice).replayed
    home = api.home.GetHome(home_pb2.GetHomeRequest(), metadata=alice.auth, timeout=TIMEOUT)
    assert [m.match_id for m in home.matches] == [second.match.match_id]
    assert "matches" not in home.unavailable_parts and "likes" not in home.unavailable_parts


def test_one_way_like_follows_at_once(cluster, api, profiles):
    playdates = community(profiles, common_pb2.COMMUNITY_MODE_ONE_WAY)
    rex, fido = new_user(cluster, api, profiles, playdates), new_user(cluster, api, profiles, playdates)
    follow = swipe(api, rex, fido)
    assert follow.outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED
    assert follow.match.direction == types_pb2.CONNECTION_DIRECTION_OUTGOING
    followers = api.matches.ListMatches(match_pb2.ListMatchesRequest(
        direction=types_pb2.CONNECTION_DIRECTION_INCOMING), metadata=fido.auth, timeout=TIMEOUT)
    assert [m.profile.user_id for m in followers.matches] == [rex.id]
    back = swipe(api, fido, rex)
    assert back.match.direction == types_pb2.CONNECTION_DIRECTION_MUTUAL
    assert back.match.match_id == follow.match.match_id


def test_block_hides_everywhere_at_once(cluster, api, profiles):
    dating = community(profiles)
    ann, ben, cat = (new_user(cluster, api, profiles, dating) for _ in range(3))
    swipe(api, ann, ben)
    swipe(api, ben, ann)
    swipe(api, ben, cat)
    blocked = api.matches.Block(match_pb2.BlockRequest(target_user_id=ben.id), metadata=ann.auth, timeout=TIMEOUT)
    assert blocked.ended_match_id
    assert not matches(api, ann).matches and not matches(api, ben).matches
    # Ben cannot reach Ann: exactly as for someone who does not exist.
    stranger = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (7 << 76)))
    for target in (ann.id, stranger):
        code = code_of(lambda: api.deck.Swipe(deck_pb2.SwipeRequest(target_user_id=target, action=LIKE),
                                              metadata=ben.auth, timeout=TIMEOUT))
        assert code == grpc.StatusCode.NOT_FOUND
    assert not api.matches.ListBlocks(match_pb2.ListBlocksRequest(), metadata=ben.auth, timeout=TIMEOUT).blocks
    listed = api.matches.ListBlocks(match_pb2.ListBlocksRequest(), metadata=ann.auth, timeout=TIMEOUT)
    assert [b.user_id for b in listed.blocks] == [ben.id]
    # Cat still sees Ben's like.
    likes = api.matches.ListLikesReceived(match_pb2.ListLikesReceivedRequest(), metadata=cat.auth, timeout=TIMEOUT)
    assert [like.user_id for like in likes.likes] == [ben.id]


def test_a_report_reaches_an_admin(cluster, api, profiles):
    dating = community(profiles)
    reporter, reported = new_user(cluster, api, profiles, dating), new_user(cluster, api, profiles, dating)
    moderator = new_user(cluster, api, profiles, dating)
    api.admin.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET, community_id=dating,
                                                             login=moderator.email), timeout=TIMEOUT)
    admin_token = api.accounts.SignIn(account_pb2.SignInRequest(community_id=dating, login=moderator.email,
                                                                password=PASSWORD), timeout=TIMEOUT).tokens.access_token
    report = api.matches.ReportUser(match_pb2.ReportUserRequest(
        target_user_id=reported.id, reason=common_pb2.REPORT_REASON_HARASSMENT, details="threats",
        idempotency_key="r1"), metadata=reporter.auth, timeout=TIMEOUT)
    listed = api.admin.ListReports(admin_pb2.ListReportsRequest(status=admin_pb2.REPORT_STATUS_OPEN,
                                                                reported_user_id=reported.id),
                                   metadata=bearer(admin_token), timeout=TIMEOUT)
    assert [r.report_id for r in listed.reports] == [report.report_id]
    assert listed.reports[0].reporter_user_id == reporter.id and listed.reports[0].details == "threats"
    assert code_of(lambda: api.admin.ListReports(admin_pb2.ListReportsRequest(), metadata=reporter.auth,
                                                 timeout=TIMEOUT)) == grpc.StatusCode.PERMISSION_DENIED
    # Deactivation goes through auth with the admin's own token: the reported account's session ends.
    resolved = api.admin.ResolveReport(admin_pb2.ResolveReportRequest(
        report_id=report.report_id, resolution=admin_pb2.REPORT_RESOLUTION_ACCOUNT_DEACTIVATED, note="threats"),
        metadata=bearer(admin_token), timeout=TIMEOUT)
    assert resolved.report.status == admin_pb2.REPORT_STATUS_RESOLVED
    deadline = time.monotonic() + 10
    while code_of(lambda: matches(api, reported)) != grpc.StatusCode.UNAUTHENTICATED and time.monotonic() < deadline:
        time.sleep(0.1)
    assert code_of(lambda: matches(api, reported)) == grpc.StatusCode.UNAUTHENTICATED


def test_no_rpc_succeeds_with_another_users_ids(cluster, api, profiles):
    """The BOLA matrix: an intruder names the ids of a pair's match, swipe and report. Zero successes."""
    dating = community(profiles)
    owner, partner, intruder = (new_user(cluster, api, profiles, dating) for _ in range(3))
    swipe(api, owner, partner)
    match_id = swipe(api, partner, owner).match.match_id
    passed = new_user(cluster, api, profiles, dating)
    pass_id = swipe(api, owner, passed, PASS).swipe_id
    report_id = api.matches.ReportUser(match_pb2.ReportUserRequest(
        target_user_id=partner.id, reason=common_pb2.REPORT_REASON_SPAM), metadata=owner.auth,
        timeout=TIMEOUT).report_id
    attempts = {
        "Unmatch": lambda: api.matches.Unmatch(match_pb2.UnmatchRequest(match_id=match_id), metadata=intruder.auth,
                                               timeout=TIMEOUT),
        "UndoPass": lambda: api.deck.UndoPass(deck_pb2.UndoPassRequest(swipe_id=pass_id), metadata=intruder.auth,
                                              timeout=TIMEOUT),
        "ListReports": lambda: api.admin.ListReports(admin_pb2.ListReportsRequest(reported_user_id=partner.id),
                                                     metadata=intruder.auth, timeout=TIMEOUT),
        "ResolveReport": lambda: api.admin.ResolveReport(admin_pb2.ResolveReportRequest(
            report_id=report_id, resolution=admin_pb2.REPORT_RESOLUTION_NO_ACTION), metadata=intruder.auth,
            timeout=TIMEOUT),
        "GetUserFootprint": lambda: api.admin.GetUserFootprint(admin_pb2.GetUserFootprintRequest(user_id=owner.id),
                                                               metadata=intruder.auth, timeout=TIMEOUT),
        "Swipe as nobody": lambda: api.deck.Swipe(deck_pb2.SwipeRequest(target_user_id=owner.id, action=LIKE),
                                                  timeout=TIMEOUT),
    }
    successes = [name for name, attempt in attempts.items() if code_of(attempt) == grpc.StatusCode.OK]
    assert successes == []
    # Nothing changed for the owner.
    assert [m.match_id for m in matches(api, owner).matches] == [match_id]
    # And what the intruder sees of the pair is nothing.
    assert not matches(api, intruder).matches
    # Unblock only lifts the caller's own block: the intruder "unblocking" for the owner changes nothing.
    api.matches.Block(match_pb2.BlockRequest(target_user_id=passed.id), metadata=owner.auth, timeout=TIMEOUT)
    api.matches.Unblock(match_pb2.UnblockRequest(target_user_id=passed.id), metadata=intruder.auth, timeout=TIMEOUT)
    listed = api.matches.ListBlocks(match_pb2.ListBlocksRequest(), metadata=owner.auth, timeout=TIMEOUT)
    assert [b.user_id for b in listed.blocks] == [passed.id]


def kindred(cluster, config_dir, community_id, *args, stdin=""):
    env = dict(os.environ, KINDRED_GATEWAY=cluster.gateway, KINDRED_COMMUNITY=community_id,
               KINDRED_CONFIG_DIR=str(config_dir))
    return subprocess.run([str(bin_dir() / "kindred"), *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_two_people_match_with_the_cli(cluster, api, profiles, tmp_path):
    dating = community(profiles)
    alice, bob = new_user(cluster, api, profiles, dating), new_user(cluster, api, profiles, dating)
    for user in (alice, bob):
        signin = kindred(cluster, tmp_path / user.id, dating, "signin", user.email, stdin=PASSWORD + "\n")
        assert signin.returncode == 0, signin.stderr
    liked = kindred(cluster, tmp_path / alice.id, dating, "like", bob.id)
    assert liked.returncode == 0 and "Recorded" in liked.stdout, liked.stderr
    likes = kindred(cluster, tmp_path / bob.id, dating, "likes")
    assert alice.id in likes.stdout
    matched = kindred(cluster, tmp_path / bob.id, dating, "like", alice.id)
    assert "match" in matched.stdout, matched.stdout + matched.stderr
    for user, other in ((alice, bob), (bob, alice)):
        listed = kindred(cluster, tmp_path / user.id, dating, "matches")
        assert other.id in listed.stdout, listed.stdout + listed.stderr
    unmatched = kindred(cluster, tmp_path / alice.id, dating, "unmatch", bob.id)
    assert unmatched.returncode == 0, unmatched.stderr
    assert "No matches" in kindred(cluster, tmp_path / bob.id, dating, "matches").stdout
    missing = kindred(cluster, tmp_path / alice.id, dating, "report", bob.id, "--reason", "nonsense")
    assert missing.returncode == 2
    reported = kindred(cluster, tmp_path / alice.id, dating, "report", bob.id, "--reason", "spam", "--block")
    assert reported.returncode == 0 and "blocked" in reported.stdout, reported.stderr
