"""schemathesis against the generated OpenAPI description (docs/api/openapi.json) and a real cluster: for every
unary RPC, a bounded number of generated Connect JSON requests (schema-valid and schema-breaking ones), sent with
a fresh member's bearer token. No answer may be a 5xx or INTERNAL; every refusal is a Connect error whose code the
RPC documents (x-connect-codes, from the proto comments) with that code's HTTP status; every success matches the
response schema. The requests go over HTTP/2 (httpx, prior knowledge, as gRPC clients connect), which the gateway's
port speaks whatever else it does. Skipped, saying why, while the gateway does not answer Connect JSON."""

import json
import os
import pathlib
import time
import uuid

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from cluster_harness import Cluster, assert_clean_stop

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "api" / "openapi.json"
DOCUMENT = json.loads(SPEC.read_text())


def side_effect_free_methods() -> set[str]:
    """The public methods marked `idempotency_level = NO_SIDE_EFFECTS` in the protos (they take Connect GET)."""
    found, service, method = set(), None, None
    for proto in sorted((ROOT / "proto" / "kindred" / "api" / "v1").glob("*.proto")):
        for line in proto.read_text().splitlines():
            words = line.split()
            if words[:1] == ["service"]:
                service = words[1]
            elif words[:1] == ["rpc"]:
                method = words[1].split("(")[0]
            elif "NO_SIDE_EFFECTS" in line and service and method:
                found.add(f"/kindred.api.v1.{service}/{method}")
    return found


SIDE_EFFECT_FREE = side_effect_free_methods()
schema = schemathesis.openapi.from_path(SPEC)
# Requests per RPC (KINDRED_FUZZ_EXAMPLES raises it for a longer run).
EXAMPLES = int(os.environ.get("KINDRED_FUZZ_EXAMPLES", "12"))
# What every refusal must look like: the Connect code → its HTTP status.
STATUS = {"canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504, "not_found": 404,
          "already_exists": 409, "permission_denied": 403, "resource_exhausted": 429, "failed_precondition": 400,
          "aborted": 409, "out_of_range": 400, "unimplemented": 501, "internal": 500, "unavailable": 503,
          "data_loss": 500, "unauthenticated": 401}
PASSWORD = "fuzz-member-passphrase"
CLIENT = httpx.Client(http1=False, http2=True, timeout=30)


def post(port, path, body, token=None):
    headers = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = CLIENT.post(f"http://127.0.0.1:{port}{path}", content=json.dumps(body).encode(), headers=headers)
    return response.status_code, response.headers.get("content-type", ""), response.content


@pytest.fixture(scope="module")
def api():
    running = Cluster()
    pids = running.pids()
    port = running.port("gateway")
    try:
        status, content_type, body = post(port, "/kindred.api.v1.ProfileService/GetCommunity", {"communityId": "dating"})
        reason = "" if status == 200 and content_type.startswith("application/json") else (
            f"the gateway does not answer Connect JSON yet (HTTP {status}: {body[:120]!r})")
    except httpx.HTTPError as error:
        reason = f"the gateway's port does not answer ({type(error).__name__}: {error})"
    if reason:
        running.stop()
        pytest.skip(f"schemathesis run skipped: {reason}")
    # One member with a profile, so that the member RPCs get past "create a profile first".
    email = f"fuzz-{uuid.uuid4().hex[:8]}@example.com"
    status, _, body = post(port, "/kindred.api.v1.AccountService/SignUp", {
        "communityId": "dating", "email": email, "username": email.split("@")[0].replace("-", "_"),
        "password": PASSWORD})
    assert status == 200, body
    status, _, body = post(port, "/kindred.api.v1.AccountService/VerifyEmail", {
        "code": {"communityId": "dating", "email": email, "code": running.verification_code(email)}})
    assert status == 200, body
    api = type("API", (), {})()
    api.cluster, api.port, api.email = running, port, email
    api.base_url = f"http://127.0.0.1:{port}"
    token = sign_in(api)
    status, _, body = post(port, "/kindred.api.v1.ProfileService/CreateProfile", {
        "fields": {"displayName": "Fuzz", "birthDate": {"year": 1990, "month": 1, "day": 2}, "bio": "generated"},
        "idempotencyKey": uuid.uuid4().hex}, token)
    assert status == 200, body
    api.counts = {}
    yield api
    print(f"\nschemathesis answers by status: {dict(sorted(api.counts.items()))}")
    assert_clean_stop(running, pids)


def sign_in(api) -> str:
    """A new session; waits out auth's per-account sign-in limit (64 sign-ins in a row) as its answer says."""
    for _ in range(20):
        status, _, body = post(api.port, "/kindred.api.v1.AccountService/SignIn", {
            "communityId": "dating", "login": api.email, "password": PASSWORD})
        if status != 429:
            break
        detail = json.loads(body)["details"][0].get("debug", {})
        time.sleep(int(detail.get("retryAfterMs", "1000")) / 1000 + 0.05)
    assert status == 200, body
    return json.loads(body)["tokens"]["accessToken"]


@pytest.fixture
def token(api):
    """A session of its own for each RPC (SignOut and SignOutEverywhere end theirs)."""
    return sign_in(api)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
def test_generated_requests_get_documented_answers(case, api, token):
    request = case.as_transport_kwargs(base_url=api.base_url, headers={"Authorization": f"Bearer {token}"})
    request["headers"].pop("Connection", None)  # HTTP/1.1 only
    if isinstance(request.get("data"), (bytes, str)):
        request["content"] = request.pop("data")
    response = CLIENT.request(**request)
    api.counts[response.status_code] = api.counts.get(response.status_code, 0) + 1
    operation = DOCUMENT["paths"][case.path]["post"]
    sent = case.body if not isinstance(case.body, bytes) else case.body[:200]
    assert response.status_code < 500, f"{case.path} answered {response.status_code} to {sent!r}: {response.text[:300]}"
    # schemathesis also breaks the protocol itself: another method, another content type. Those are refused at the
    # HTTP edge (405, 415; an OPTIONS without an allowed origin is a refused CORS preflight, 403), before any RPC runs.
    if request["method"] != "POST":
        # A GET of a side-effect-free method is a Connect GET: without its query (encoding, message) it is refused
        # 415 or 400; any other method, or GET of a method with side effects, is 405.
        expected = {403} if request["method"] == "OPTIONS" else {405}
        if request["method"] == "GET" and case.path in SIDE_EFFECT_FREE:
            expected = {400, 415}
        assert response.status_code in expected, (case.path, request["method"], response.status_code)
        return
    if not (request["headers"].get("Content-Type") or "").startswith("application/json"):
        assert response.status_code == 415, (case.path, request["headers"].get("Content-Type"), response.status_code)
        return
    if response.status_code == 200:
        case.validate_response(response, checks=[content_type_conformance, response_schema_conformance])
        return
    error = response.json()
    assert error["code"] != "internal", f"{case.path}: INTERNAL for {sent!r}: {error}"
    assert error["code"] in operation["x-connect-codes"], (
        f"{case.path} answered {error['code']} (not documented: {operation['x-connect-codes']}) to {sent!r}: {error}")
    assert STATUS[error["code"]] == response.status_code, (case.path, error, response.status_code)
    assert response.headers["content-type"].startswith("application/json")
