"""The whole cluster, started by services/run-cluster.sh, driven from outside as an app would: Python grpcio
through the gateway's public API, the `kindred` CLI, the admin ports, and SIGTERM to a server under load."""

import base64
import json
import os
import pathlib
import pwd
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
import uuid

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cluster_config import SERVERS, SERVERS_WITH_TABLES
from cluster_harness import ROOT, Cluster, assert_clean_stop, bin_dir, free_port_base, processes_mentioning

from kindred.api.v1 import (account_pb2, account_pb2_grpc, home_pb2, home_pb2_grpc, profile_pb2,  # noqa: E402
                            profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2  # noqa: E402
from kindred.discovery.v1 import discovery_pb2, discovery_pb2_grpc  # noqa: E402

TIMEOUT = 30
PASSWORD = "correct horse battery staple"
NEW_PASSWORD = "purple monkey dishwasher 42"


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def bearer(token: str) -> list:
    return [("authorization", f"Bearer {token}")]


def expect_code(code, call):
    try:
        call()
    except grpc.RpcError as error:
        assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
        return error
    raise AssertionError(f"expected {code}, the call succeeded")


# Here rather than in a conftest.py: Tests/Interop's tests import their own `conftest` module by that name.
@pytest.fixture(scope="module")
def cluster():
    """The cluster the tests of this file share (but the last); stopped with Ctrl-C when they are done."""
    running = Cluster()
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


@pytest.fixture(scope="module")
def accounts(channel):
    return account_pb2_grpc.AccountServiceStub(channel)


def sign_up_and_verify(cluster, accounts, community, email, username, password=PASSWORD):
    accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=email, username=username,
                                              password=password), timeout=TIMEOUT)
    code = cluster.verification_code(email)
    verified = accounts.VerifyEmail(account_pb2.VerifyEmailRequest(
        code=account_pb2.VerificationCode(community_id=community, email=email, code=code)), timeout=TIMEOUT)
    assert verified.email == email


def sign_up_and_sign_in(cluster, accounts, community, prefix="m"):
    """A new verified account of `community`, signed in: the SignIn response (its account and tokens)."""
    email = f"{unique(prefix + '-')}@example.com"
    sign_up_and_verify(cluster, accounts, community, email, unique(prefix + "_"))
    return accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=PASSWORD),
                           timeout=TIMEOUT)


def new_member(cluster, channel, name="Member", community="fitness", prefix="m"):
    """A signed-in member with a profile (a name and a birth date: nothing else is needed to be shown), by default of
    the preset community fitness: (user id, auth metadata)."""
    signed = sign_up_and_sign_in(cluster, account_pb2_grpc.AccountServiceStub(channel), community, prefix)
    auth = bearer(signed.tokens.access_token)
    profile_pb2_grpc.ProfileServiceStub(channel).CreateProfile(profile_pb2.CreateProfileRequest(
        fields=types_pb2.ProfileFields(display_name=name, birth_date=common_pb2.CalendarDate(year=1990, month=5, day=1)),
        idempotency_key=str(uuid.uuid4())), metadata=auth, timeout=TIMEOUT)
    return signed.account.user_id, auth


@pytest.fixture(scope="module")
def signed_in(cluster, accounts):
    """One verified, signed-in account for the tests that only need a valid token."""
    community, email, username = unique("e2e-"), f"{unique('bo-')}@example.com", unique("bo_")
    sign_up_and_verify(cluster, accounts, community, email, username)
    return accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=PASSWORD),
                           timeout=TIMEOUT)


# ---- the cluster itself ----

def test_every_server_reports_serving_on_its_port(cluster):
    servers = cluster.servers()
    assert {"auth", "gateway"} <= set(servers), f"run-cluster.sh started only {servers}"
    for name in servers:
        with grpc.insecure_channel(f"127.0.0.1:{cluster.port(name)}") as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
        assert status == health_pb2.HealthCheckResponse.SERVING, name


def test_admin_ports_serve_prometheus_metrics(cluster, accounts):
    # One call through the gateway, so both servers have counted something.
    accounts.CheckUsername(account_pb2.CheckUsernameRequest(community_id="e2e-metrics", username="someone"),
                           timeout=TIMEOUT)
    for name in cluster.servers():
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.admin_port(name)}/metrics", timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain"), name
            text = response.read().decode()
        assert "# TYPE grpc_server_handled_total counter" in text, name
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.admin_port(name)}/healthz", timeout=10) as response:
            assert response.status == 200
    gateway = urllib.request.urlopen(f"http://127.0.0.1:{cluster.admin_port('gateway')}/metrics", timeout=10).read()
    assert b'grpc_method="/kindred.api.v1.AccountService/CheckUsername",grpc_code="OK"' in gateway
    assert b'gateway_downstream_calls_total{service="auth"' in gateway


def test_private_postgres_with_one_role_per_service(cluster):
    assert cluster.psql("SHOW listen_addresses") == "", "unix socket only"
    assert cluster.psql("SHOW synchronous_commit") == "on" and cluster.psql("SHOW fsync") == "on"
    if os.geteuid() == 0:
        postmaster = cluster.pids()["postgres"]
        uid = int(next(line for line in pathlib.Path(f"/proc/{postmaster}/status").read_text().splitlines()
                       if line.startswith("Uid:")).split()[1])
        assert uid == pwd.getpwnam("postgres").pw_uid, "as root, PostgreSQL runs as the postgres user"
    for name in SERVERS_WITH_TABLES:
        role = f"kindred_{name}"
        assert cluster.psql(f"SELECT nspowner::regrole FROM pg_namespace WHERE nspname = '{name}'") == role
        assert cluster.psql(f"SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = '{role}'") \
            == "f|f|f"
        # The migrations ran as the service's role: it owns every table, and it can read them.
        assert cluster.psql(f"SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = '{name}'") == role
        migrations = sorted((ROOT / "services" / name / "migrations").glob("*.sql"))
        assert cluster.psql(f"SELECT max(version) FROM {name}.schema_migrations", user=role) == \
            str(int(migrations[-1].name[:4]))
    # The role script is idempotent and also serves compose, where each role gets a password (scram).
    line = next(line for line in cluster.lines if line.strip().startswith("db:"))
    psql, socket_dir = re.search(r'db:\s+(\S+) ".*host=([^"]+)"', line).groups()
    env = dict(os.environ, PGHOST=urllib.parse.unquote(socket_dir), PGPORT="5432", PGUSER="postgres",
               PSQL=psql, KINDRED_SERVERS_WITH_TABLES=" ".join(SERVERS_WITH_TABLES))
    role_passwords = "SELECT string_agg(coalesce(left(rolpassword, 14), 'none'), ',' ORDER BY rolname) " \
        "FROM pg_authid WHERE rolname LIKE 'kindred\\_%'"
    assert cluster.psql(role_passwords) == ",".join(["none"] * len(SERVERS_WITH_TABLES))
    passwords = {f"KINDRED_{name.upper()}_DB_PASSWORD": unique("pw-") for name in SERVERS_WITH_TABLES}
    subprocess.run([str(ROOT / "services" / "postgres" / "init-roles.sh")], env=dict(env, **passwords), check=True,
                   capture_output=True)
    assert cluster.psql(role_passwords) == ",".join(["SCRAM-SHA-256$"] * len(SERVERS_WITH_TABLES))
    subprocess.run([str(ROOT / "services" / "postgres" / "init-roles.sh")], env=env, check=True, capture_output=True)
    assert cluster.psql(role_passwords) == ",".join(["none"] * len(SERVERS_WITH_TABLES))

    # Nobody else may even connect to the database.
    cluster.psql("CREATE ROLE kindred_probe LOGIN")
    try:
        with pytest.raises(RuntimeError, match="permission denied"):
            cluster.psql("SELECT 1", user="kindred_probe")
    finally:
        cluster.psql("DROP ROLE kindred_probe")


def test_a_second_run_cluster_refuses_and_leaves_the_running_one_alone(cluster):
    before = cluster.pids()
    second = subprocess.run([str(ROOT / "services" / "run-cluster.sh")], env=cluster.env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)
    assert second.returncode != 0
    assert "already running" in second.stderr
    assert f"run-cluster {before['run-cluster']}" in second.stderr and f"kill {before['run-cluster']}" in second.stderr
    assert cluster.pids() == before and cluster.process.poll() is None
    test_every_server_reports_serving_on_its_port(cluster)


# ---- the public API through the gateway, with grpcio ----

def test_account_lifecycle_through_the_gateway(cluster, accounts):
    community, email, username = unique("e2e-"), f"{unique('ann-')}@example.com", unique("ann_")
    sign_up_and_verify(cluster, accounts, community, email, username)

    signed_in = accounts.SignIn(account_pb2.SignInRequest(
        community_id=community, login=email, password=PASSWORD,
        client=account_pb2.ClientInfo(device_name="pytest")), timeout=TIMEOUT)
    first = signed_in.tokens
    assert signed_in.account.username == username and signed_in.account.email_verified
    me = accounts.GetAccount(account_pb2.GetAccountRequest(), metadata=bearer(first.access_token),
                             timeout=TIMEOUT).account
    assert (me.user_id, me.email, me.username, me.community_id) == (signed_in.account.user_id, email, username,
                                                                     community)
    assert me.status == account_pb2.ACCOUNT_STATUS_ACTIVE and me.password_set

    rotated = accounts.Refresh(account_pb2.RefreshRequest(refresh_token=first.refresh_token), timeout=TIMEOUT).tokens
    assert rotated.refresh_token != first.refresh_token and rotated.session_id == first.session_id
    assert accounts.GetAccount(account_pb2.GetAccountRequest(), metadata=bearer(rotated.access_token),
                               timeout=TIMEOUT).account.user_id == me.user_id
    # The spent refresh token again: reuse, which revokes the whole family (the rotated token too).
    expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: accounts.Refresh(
        account_pb2.RefreshRequest(refresh_token=first.refresh_token), timeout=TIMEOUT))
    expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: accounts.Refresh(
        account_pb2.RefreshRequest(refresh_token=rotated.refresh_token), timeout=TIMEOUT))

    second = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=username, password=PASSWORD),
                             timeout=TIMEOUT).tokens
    accounts.ChangePassword(account_pb2.ChangePasswordRequest(current_password=PASSWORD, new_password=NEW_PASSWORD),
                            metadata=bearer(second.access_token), timeout=TIMEOUT)
    expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: accounts.SignIn(account_pb2.SignInRequest(
        community_id=community, login=email, password=PASSWORD), timeout=TIMEOUT))
    third = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=NEW_PASSWORD),
                            timeout=TIMEOUT).tokens

    sessions = accounts.ListSessions(account_pb2.ListSessionsRequest(), metadata=bearer(third.access_token),
                                     timeout=TIMEOUT).sessions
    ids = {session.session_id for session in sessions}
    assert {second.session_id, third.session_id} <= ids and first.session_id not in ids
    assert [s.session_id for s in sessions if s.current] == [third.session_id]

    accounts.SignOut(account_pb2.SignOutRequest(), metadata=bearer(third.access_token), timeout=TIMEOUT)
    expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: accounts.Refresh(
        account_pb2.RefreshRequest(refresh_token=third.refresh_token), timeout=TIMEOUT))

    deleted = accounts.DeleteAccount(account_pb2.DeleteAccountRequest(current_password=NEW_PASSWORD),
                                     metadata=bearer(second.access_token), timeout=TIMEOUT)
    assert deleted.deleted_unix_ms > 0
    expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: accounts.SignIn(account_pb2.SignInRequest(
        community_id=community, login=email, password=NEW_PASSWORD), timeout=TIMEOUT))


def test_delivered_mail_leaves_no_link_or_code_in_the_database(cluster, accounts):
    """Once the relay handed a mail to the SMTP server, its body (link token, code) and address are erased from
    mail_outbox; only the address hash, template, timestamps and outcome remain. The whole auth schema is dumped
    and searched, so the secrets are nowhere (the token tables hold hashes only)."""
    community, email, username = unique("e2e-"), f"{unique('mo-')}@example.com", unique("mo_")
    accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=email, username=username,
                                              password=PASSWORD), timeout=TIMEOUT)
    body = cluster.wait_for_mail(email)
    token = re.search(r"token=([A-Za-z0-9_-]+)", body).group(1)
    code = re.search(r"code in the app: (\d{6})", body).group(1)
    deadline = time.monotonic() + 10  # the relay marks the row just after the sink accepted the mail
    while cluster.psql("SELECT count(*) FROM auth.mail_outbox WHERE sent_at IS NULL AND failed_at IS NULL") != "0":
        assert time.monotonic() < deadline, "the relay did not record the delivery"
        time.sleep(0.05)
    line = next(line for line in cluster.lines if line.strip().startswith("db:"))
    psql, url = re.match(r'\s*db:\s+(\S+) "(.+)"', line).groups()
    dump = subprocess.run([str(pathlib.Path(psql).parent / "pg_dump"), "--data-only", "--schema=auth", url],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert email.split("@")[0] in dump  # the account itself is there (the dump is not empty)
    assert token not in dump
    assert not re.search(rf"(?<![0-9a-f]){code}(?![0-9a-f])", cluster.psql(
        "SELECT coalesce(string_agg(row_to_json(m)::text, ' '), '') FROM auth.mail_outbox m"))
    row = cluster.psql(f"SELECT template, sent_at IS NOT NULL, recipient IS NULL AND text_body IS NULL "
                       f"FROM auth.mail_outbox WHERE recipient_hash = sha256(convert_to('{email}', 'UTF8'))")
    assert row == "verify_email|t|t", row
    # The code still verifies the address: erasing the mail did not touch the token.
    accounts.VerifyEmail(account_pb2.VerifyEmailRequest(code=account_pb2.VerificationCode(
        community_id=community, email=email, code=code)), timeout=TIMEOUT)


def forged(token: str) -> str:
    """The same header and claims, signed with a key auth never had."""
    header, payload, _ = token.split(".")
    signature = Ed25519PrivateKey.generate().sign(f"{header}.{payload}".encode())
    return f"{header}.{payload}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def test_an_account_gets_its_mails_in_its_locale(cluster, accounts):
    """Auth writes an account's mails in the language of the locale it signed up with (French here; English for
    a language without texts), as the development SMTP sink receives them: the subject is decoded from its
    RFC 2047 encoded-words, and the sink still finds the code in the French text."""
    community = unique("e2e-")
    french, german = f"{unique('fr-')}@example.com", f"{unique('de-')}@example.com"
    accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=french, username=unique("fr_"),
                                              password=PASSWORD, locale="fr-FR"), timeout=TIMEOUT)
    accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=german, username=unique("de_"),
                                              password=PASSWORD, locale="de-DE"), timeout=TIMEOUT)
    body = cluster.wait_for_mail(french, subject="Confirmez votre adresse e-mail")
    code = re.search(r"code dans l'application : (\d{6})", body)
    assert code, body
    sink_log = lambda: (cluster.run_dir / "logs" / "smtp-sink.log").read_text()
    deadline = time.monotonic() + 10
    while not (f"to={french} " in sink_log() and f"code={code.group(1)}" in sink_log()):
        assert time.monotonic() < deadline, "the sink did not log the French mail's code"
        time.sleep(0.05)
    assert "code in the app" in cluster.wait_for_mail(german, subject="Confirm your email address")
    accounts.VerifyEmail(account_pb2.VerifyEmailRequest(code=account_pb2.VerificationCode(
        community_id=community, email=french, code=code.group(1))), timeout=TIMEOUT)


def test_calls_without_a_valid_token_are_unauthenticated(accounts, signed_in):
    token = signed_in.tokens.access_token
    assert accounts.GetAccount(account_pb2.GetAccountRequest(), metadata=bearer(token), timeout=TIMEOUT).account
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    tampered_claims = dict(claims, sub=str(uuid.uuid4()))
    tampered = ".".join([header, base64.urlsafe_b64encode(json.dumps(tampered_claims).encode()).rstrip(b"=").decode(),
                         signature])
    # (Not "Bearer " with a trailing space: HTTP/2 forbids that header value, and nghttp2 resets the stream.)
    for metadata in [None, bearer(forged(token)), bearer(tampered), bearer("garbage"), bearer("a.b.c"),
                     [("authorization", "Bearer")], [("authorization", token)],
                     [("authorization", "Basic dXNlcjpwYXNz")]]:
        expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: accounts.GetAccount(
            account_pb2.GetAccountRequest(), metadata=metadata, timeout=TIMEOUT))


def test_bad_input_is_invalid_argument(accounts):
    for request in [
        account_pb2.SignUpRequest(community_id="e2e-input", email="not-an-email", username="valid_name",
                                  password=PASSWORD),
        account_pb2.SignUpRequest(community_id="e2e-input", email="ok@example.com", username="x",
                                  password=PASSWORD),
        account_pb2.SignUpRequest(community_id="e2e-input", email="ok@example.com", username="valid_name",
                                  password="short"),
        account_pb2.SignUpRequest(community_id="Not A Slug!", email="ok@example.com", username="valid_name",
                                  password=PASSWORD),
    ]:
        expect_code(grpc.StatusCode.INVALID_ARGUMENT, lambda: accounts.SignUp(request, timeout=TIMEOUT))


def test_home_returns_the_account_and_names_the_missing_parts(cluster, channel, signed_in):
    home = home_pb2_grpc.HomeServiceStub(channel)
    response = home.GetHome(home_pb2.GetHomeRequest(), metadata=bearer(signed_in.tokens.access_token),
                            timeout=TIMEOUT)
    assert response.account.user_id == signed_in.account.user_id
    assert response.account.username == signed_in.account.username
    if "profile" not in cluster.servers():
        assert "profile" in response.unavailable_parts and not response.HasField("profile")
    expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: home.GetHome(home_pb2.GetHomeRequest(), timeout=TIMEOUT))


# ---- the kindred CLI ----

def kindred(cluster, config_dir, community, *args, stdin="", gateway=None):
    env = dict(os.environ, KINDRED_GATEWAY=gateway or cluster.gateway, KINDRED_COMMUNITY=community,
               KINDRED_CONFIG_DIR=str(config_dir))
    return subprocess.run([str(bin_dir() / "kindred"), *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_account_lifecycle_with_the_kindred_cli(cluster, tmp_path):
    community, email, username = unique("cli-"), f"{unique('cy-')}@example.com", unique("cy_")

    def run(*args, stdin="", status=0):
        result = kindred(cluster, tmp_path / "config", community, *args, stdin=stdin)
        assert result.returncode == status, f"kindred {' '.join(args)} -> {result.returncode}\n{result.stdout}{result.stderr}"
        return result

    run("signup", "--email", email, "--username", username, stdin=PASSWORD + "\n")
    run("verify", "--email", email, "--code", cluster.verification_code(email))
    assert username in run("signin", username, stdin=PASSWORD + "\n").stdout
    assert (tmp_path / "config" / "session.json").stat().st_mode & 0o077 == 0, "session.json must be private"
    me = json.loads(run("whoami", "--json").stdout)
    assert (me["username"], me["email"], me["email_verified"], me["community_id"]) == (username, email, True,
                                                                                        community)
    sessions = json.loads(run("sessions", "--json").stdout)["sessions"]
    assert [s["session_id"] for s in sessions if s.get("current")] == [me["session_id"]]

    run("change-password", stdin=f"{PASSWORD}\n{NEW_PASSWORD}\n")
    run("signout")
    run("whoami", status=2)  # not signed in: local state, no call
    run("signin", email, stdin=PASSWORD + "\n", status=1)  # the old password is refused by the gateway
    run("signin", email, stdin=NEW_PASSWORD + "\n")
    run("delete-account", "--yes", stdin=NEW_PASSWORD + "\n")
    run("signin", email, stdin=NEW_PASSWORD + "\n", status=1)

    closed = kindred(cluster, tmp_path / "other", community, "check-username", "someone", gateway="127.0.0.1:1")
    assert closed.returncode == 3, closed.stderr


# ---- starting and restarting ----

def test_discovery_checks_user_tokens_and_receives_auth_events(cluster, accounts):
    """discovery-server verifies user tokens with auth's keys and session ends (its own service secret), and
    auth's relay delivers account events to it: a deletion reaches discovery's inbox and leaves no rows."""
    if "discovery" not in cluster.servers():
        pytest.skip("discovery-server is not built")
    community, email, username = unique("e2e-"), f"{unique('dee-')}@example.com", unique("dee_")
    sign_up_and_verify(cluster, accounts, community, email, username)
    signed_in = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=PASSWORD),
                                timeout=TIMEOUT)
    user, token = signed_in.account.user_id, signed_in.tokens.access_token
    with grpc.insecure_channel(f"127.0.0.1:{cluster.port('discovery')}") as channel:
        discovery = discovery_pb2_grpc.DiscoveryServiceStub(channel)
        # A valid user without an indexed profile: the token is accepted, the deck needs a profile first.
        error = expect_code(grpc.StatusCode.FAILED_PRECONDITION,
                            lambda: discovery.GetDeck(discovery_pb2.GetDeckRequest(), metadata=bearer(token),
                                                      timeout=TIMEOUT))
        assert "profile" in error.details().lower()
        expect_code(grpc.StatusCode.PERMISSION_DENIED, lambda: discovery.GetDeck(
            discovery_pb2.GetDeckRequest(viewer_user_id=str(uuid.uuid4())), metadata=bearer(token), timeout=TIMEOUT))
        expect_code(grpc.StatusCode.UNAUTHENTICATED, lambda: discovery.GetDeck(
            discovery_pb2.GetDeckRequest(), metadata=bearer("forged"), timeout=TIMEOUT))
    accounts.DeleteAccount(account_pb2.DeleteAccountRequest(current_password=PASSWORD), metadata=bearer(token),
                           timeout=TIMEOUT)
    deadline = time.monotonic() + 20
    delivered = "0"
    while time.monotonic() < deadline and delivered == "0":
        delivered = cluster.psql(
            f"SELECT count(*) FROM discovery.events_inbox WHERE producer = 'auth' AND partition_key = '{user}'")
        time.sleep(0.2)
    assert delivered == "1", "auth's AccountDeleted did not reach discovery"
    assert cluster.psql(f"SELECT count(*) FROM discovery.candidates WHERE user_id = '{user}'") == "0"


def test_a_restart_keeps_accounts_and_signing_keys():
    first = Cluster()
    pids = first.pids()
    try:
        assert "Creating the PostgreSQL" in first.output()
        with grpc.insecure_channel(first.gateway) as channel:
            accounts = account_pb2_grpc.AccountServiceStub(channel)
            community, email, username = unique("rs-"), f"{unique('di-')}@example.com", unique("di_")
            sign_up_and_verify(first, accounts, community, email, username)
            before = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email,
                                                               password=PASSWORD), timeout=TIMEOUT)
    finally:
        assert_clean_stop(first, pids, keep_folder=True)

    second = Cluster(folder=first.folder)
    pids = second.pids()
    try:
        assert "Creating the PostgreSQL" not in second.output(), "the data folder is reused"
        with grpc.insecure_channel(second.gateway) as channel:
            accounts = account_pb2_grpc.AccountServiceStub(channel)
            # The token of the first run verifies: auth kept its signing key in the data folder.
            me = accounts.GetAccount(account_pb2.GetAccountRequest(), metadata=bearer(before.tokens.access_token),
                                     timeout=TIMEOUT).account
            assert me.user_id == before.account.user_id
            again = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=username,
                                                              password=PASSWORD), timeout=TIMEOUT)
            assert again.account.user_id == before.account.user_id
    finally:
        assert_clean_stop(second, pids)


def test_a_cluster_stops_cleanly_when_the_process_it_stops_with_is_gone():
    """A test run killed hard runs no `finally`: the harness gives run-cluster.sh its own pid
    (KINDRED_STOP_WITH_PID), and the cluster stops cleanly once that process is gone. A sleeping process stands in
    for the test run here, killed with SIGKILL."""
    stand_in = subprocess.Popen(["sleep", "600"])
    running = Cluster(KINDRED_STOP_WITH_PID=str(stand_in.pid))
    pids = running.pids()
    try:
        stand_in.kill()
        stand_in.wait()
        assert running.wait_for_exit(timeout=120) == 0, running.output()
        left = running.leftovers(pids)
    finally:
        running.stop(force_cleanup=True)
    assert not left, f"processes left: {left}"
    log = (running.run_dir / "logs" / "run-cluster.log").read_text()
    assert f"process {stand_in.pid} (KINDRED_STOP_WITH_PID) is gone; stopping the cluster" in log, log
    for name in pids:
        if name in SERVERS:
            assert f"  {name} stopped (exit 0)" in log, log
    assert "  postgres stopped" in log and "Kindred stopped." in log, log
    shutil.rmtree(running.folder, ignore_errors=True)


def test_a_taken_port_stops_the_start_before_anything_runs():
    base, smtp = free_port_base()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", base + 1))  # auth's port
        blocker.listen()
        refused = Cluster(wait=False, ports=(base, smtp))
        assert refused.wait_for_exit() == 1
    assert f"port {base + 1} (auth) is in use" in refused.output()
    assert "postgres" not in refused.output().lower().replace("postgresql", "")
    assert not processes_mentioning(str(refused.folder))
    shutil.rmtree(refused.folder)


def test_a_server_that_cannot_start_stops_everything_with_its_log():
    broken = Cluster(wait=False, KINDRED_AUTH_ACCESS_TOKEN_TTL_SECONDS="5")  # auth accepts 60..900
    assert broken.wait_for_exit(timeout=120) == 1
    output = broken.output()
    assert "auth-server" in output and "failed" in output
    assert "KINDRED_AUTH_ACCESS_TOKEN_TTL_SECONDS" in output, "the log tail names the problem"
    assert "  postgres stopped" in output and "Kindred is up" not in output
    assert not processes_mentioning(str(broken.folder))
    shutil.rmtree(broken.folder)


# ---- SIGTERM to a server under load (its own cluster: auth goes away for good) ----

def test_sigterm_lets_in_flight_calls_finish_and_later_calls_fail_unavailable():
    # keep: run-cluster.sh reports auth's exit instead of stopping the whole cluster, so the gateway stays up. One
    # auth replica, even in a scale-out run: with two, the other takes the calls (test_replicas.py shows it).
    cluster = Cluster(KINDRED_ON_SERVER_EXIT="keep", scale_out=False)
    pids = cluster.pids()
    try:
        with grpc.insecure_channel(cluster.gateway) as channel:
            accounts = account_pb2_grpc.AccountServiceStub(channel)
            community, email, username = unique("term-"), f"{unique('cy-')}@example.com", unique("cy_")
            sign_up_and_verify(cluster, accounts, community, email, username)

            # Each SignIn hashes with Argon2id (tens of ms on this machine's cores): 24 of them queue up in auth.
            request = account_pb2.SignInRequest(community_id=community, login=email, password=PASSWORD)
            finished_at, lock = {}, threading.Lock()
            futures = []
            for index in range(24):
                future = accounts.SignIn.future(request, timeout=TIMEOUT)
                future.add_done_callback(lambda f, i=index: (lock.acquire(), finished_at.setdefault(i, time.monotonic()),
                                                              lock.release()))
                futures.append(future)
            futures[0].result()  # auth is busy with the rest now
            signalled_at = time.monotonic()
            os.kill(pids["auth"], signal.SIGTERM)

            results = []
            for future in futures:
                try:
                    results.append(("OK", future.result().tokens.session_id))
                except grpc.RpcError as error:
                    results.append((error.code().name, error.details()))
            assert all(code == "OK" for code, _ in results), results
            late = [i for i, at in finished_at.items() if at > signalled_at]
            assert len(late) >= 8, f"only {len(late)} calls were still in flight at SIGTERM: nothing was drained"

            # auth drained and exited 0 (run-cluster.sh reaped it and says so).
            deadline = time.monotonic() + 30
            line = f"auth (pid {pids['auth']}) exited on its own with status"
            while line not in cluster.output() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert f"{line} 0;" in cluster.output(), cluster.output()

            # New calls through the gateway: a clean UNAVAILABLE, well within their deadline, every time.
            for _ in range(3):
                started = time.monotonic()
                error = expect_code(grpc.StatusCode.UNAVAILABLE, lambda: accounts.SignIn(request, timeout=10))
                assert time.monotonic() - started < 8, "the gateway held the call instead of failing it"
                assert "retry" in error.details().lower()
            with grpc.insecure_channel(cluster.gateway) as fresh:
                status = health_pb2_grpc.HealthStub(fresh).Check(health_pb2.HealthCheckRequest(), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.SERVING, "the gateway itself stays up"
    finally:
        assert_clean_stop(cluster, pids, exited_before=("auth",))
