"""A database per service: the cluster on two PostgreSQL servers (services/run-cluster.sh --databases 2: auth,
profile, discovery on the first, match, chat, notify on the second) plus a streaming standby of the first
(--standby), which profile reads other members' cards from.

- Each service's schema and connections are on its own server only.
- Read-your-writes holds with the standby deliberately behind (replay paused with pg_wal_replay_pause()): a member's
  own reads after a write see it at once, while another member's card comes from the standby, as old as its measured
  lag (db_standby_lag_seconds), and from the primary once that lag passes KINDRED_PROFILE_READ_MAX_LAG_MS.
- The product's key flows on that layout: the README's walkthrough (sign up, profiles with photos, deck, like,
  match, live chat) and the read-your-writes checks of test_read_your_writes.py, imported here and run against
  this module's cluster."""
import re
import time
import urllib.request

import pytest

from cluster_harness import Cluster, assert_clean_stop, replica_port
from test_cluster import TIMEOUT
from test_read_your_writes import BOOTSTRAP_SECRET, Member, like
# The read-your-writes checks and the walkthrough, collected again here: their fixtures resolve to this module's
# cluster.
from test_read_your_writes import admin, api, channel, mutual  # noqa: F401 - fixtures
from test_read_your_writes import test_a_match_takes_the_first_message_of_either_side_at_once  # noqa: F401
from test_read_your_writes import test_new_profiles_can_see_their_deck_and_swipe_at_once  # noqa: F401
from test_walkthrough import test_two_people_meet_match_and_chat_exactly_as_the_readme_says  # noqa: F401

from kindred.api.v1 import deck_pb2, profile_pb2, types_pb2  # noqa: E402

MAX_LAG_MS = 8000
SERVICES_ON = {"postgres": ["auth", "profile", "discovery"], "postgres-2": ["match", "chat", "notify"]}


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(args=("--databases", "2", "--standby"), KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET,
                      KINDRED_DISCOVERY_VIEWER_RATE="1000", KINDRED_DISCOVERY_VIEWER_BURST="1000",
                      KINDRED_PROFILE_READ_MAX_LAG_MS=str(MAX_LAG_MS))
    pids = running.pids()
    assert {"postgres", "postgres-2", "postgres-standby"} <= set(pids), pids
    yield running
    assert_clean_stop(running, pids)
    for name in ("postgres-2", "postgres-standby"):
        assert f"  {name} stopped" in running.output()


def wait_for(what, condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def profile_admin_ports(cluster):
    """The admin port of every profile replica (one, or profile.2 ... as well when scaled out)."""
    replicas = [name for name in cluster.pids() if name == "profile" or name.startswith("profile.")]
    return [cluster.admin_port("profile") if name == "profile"
            else replica_port(cluster.base, "profile", int(name.removeprefix("profile.")), admin=True)
            for name in replicas]


def metric(cluster, name, labels, combine=sum):
    """`combine` of one sample of each profile replica's admin /metrics (the sum by default: counters), or None
    when a replica has none."""
    samples = []
    for port in profile_admin_ports(cluster):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        for line in text.splitlines():
            match = re.match(rf'{name}\{{(.*)\}} (\S+)$', line)
            if match and all(f'{key}="{value}"' in match.group(1) for key, value in labels.items()):
                samples.append(float(match.group(2)))
                break
        else:
            return None
    return combine(samples)


def standby_lag(cluster, combine):
    """`combine` of the profile replicas' measured standby lags, in seconds."""
    return metric(cluster, "db_standby_lag_seconds", {"pool": "profile"}, combine)


def every_lag_known(values):
    """The largest of the replicas' standby lags, -1 while one of them is unknown (negative)."""
    return max(values) if min(values) >= 0 else -1


def test_each_service_has_its_schema_and_connections_on_its_own_server(cluster):
    for server, services in SERVICES_ON.items():
        psql, url = next((p, u) for p, u, s in cluster.databases() if s == services)
        other = [name for names in SERVICES_ON.values() if names != services for name in names]
        schemas = set(cluster.psql("SELECT string_agg(nspname, ' ') FROM pg_namespace", server=services[0]).split())
        assert set(services) <= schemas and not set(other) & schemas, (server, schemas)
        # Every service with tables holds connections (its pool, its relay's LISTEN) on its own server only.
        names = set(cluster.psql("SELECT string_agg(DISTINCT application_name, ' ') FROM pg_stat_activity "
                                 "WHERE application_name LIKE 'kindred-%'", server=services[0]).split())
        assert names and names <= {f"kindred-{name}" for name in services}, (server, names)
    assert cluster.psql("SELECT pg_is_in_recovery()", server="standby") == "t"
    assert cluster.psql("SELECT count(*) FROM profile.profiles", server="standby").isdigit()


def bio_seen(api, member, other):
    """The bio of `other`'s card as `member` sees it (GetProfile of another member: GetProfiles in profile)."""
    return api.profiles.GetProfile(profile_pb2.GetProfileRequest(user_id=other.id), metadata=member.auth,
                                   timeout=TIMEOUT).profile.bio


def set_bio(api, member, bio):
    return api.profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(bio=bio), update_paths=["bio"]), metadata=member.auth,
        timeout=TIMEOUT).profile.fields.bio


def test_own_reads_see_own_writes_while_the_standby_is_behind(cluster, api, mutual):
    ann, ben = Member(cluster, api, mutual, "Ann"), Member(cluster, api, mutual, "Ben")
    like(api, ann, ben)
    assert like(api, ben, ann).outcome == deck_pb2.SWIPE_OUTCOME_MATCHED  # matched: each sees the other's card
    set_bio(api, ben, "before")
    wait_for("the standby caught up", lambda: bio_seen(api, ann, ben) == "before")
    standby_reads = metric(cluster, "db_standby_reads_total", {"target": "standby"})
    assert standby_reads and standby_reads > 0, "profile reads cards from the standby"

    cluster.psql("SELECT pg_wal_replay_pause()", server="standby")
    try:
        wait_for("replay paused", lambda: cluster.psql("SELECT pg_get_wal_replay_pause_state()",
                                                       server="standby") == "paused")
        assert set_bio(api, ben, "after") == "after"
        written = time.monotonic()
        # Ben's own reads: his profile, and his own card, at once.
        own = api.profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=ben.auth, timeout=TIMEOUT)
        assert own.profile.fields.bio == "after"
        assert bio_seen(api, ben, ben) == "after", "a member's own card must come from the primary"
        # Ann's view of Ben comes from the standby: what it replayed before the pause (it is well within the lag).
        assert bio_seen(api, ann, ben) == "before", "another member's card should come from the standby"
        assert time.monotonic() - written < MAX_LAG_MS / 1000, "the stale read should have been within the lag bound"
        # Once the measured lag passes the bound (every profile replica measures its own), Ann reads from the primary.
        wait_for("the lag metric past the bound", lambda: (standby_lag(cluster, min) or -1) > MAX_LAG_MS / 1000,
                 timeout=MAX_LAG_MS / 1000 + 60)
        assert metric(cluster, "db_standby_lag_bytes", {"pool": "profile"}, min) > 0
        assert bio_seen(api, ann, ben) == "after"
    finally:
        cluster.psql("SELECT pg_wal_replay_resume()", server="standby")
    wait_for("the lag back under a second",
             lambda: 0 <= (standby_lag(cluster, every_lag_known) or -1) < 1)
    before = metric(cluster, "db_standby_reads_total", {"target": "standby"})
    assert bio_seen(api, ann, ben) == "after"
    assert metric(cluster, "db_standby_reads_total", {"target": "standby"}) > before, "back on the standby"
