"""The gateway's web protocols in a running cluster (services/run-cluster.sh), each through an independent client:
the Connect project's own Python runtime (`connectrpc`, over HTTP/2) for Connect unary and server streaming in
binary and JSON and for gRPC-Web, curl for Connect JSON as the API reference shows it, gRPC-Web hand-framed over
HTTP/2 with `h2` (flag-0x80 trailer frame), and grpcio for gRPC. The same call returns the same message and the same
error code whichever protocol carried it, Connect errors carry the Kindred ErrorDetail, and CORS preflights are
answered for allowed origins only."""

import base64
import http.client
import json
import socket
import struct
import subprocess
import time
import urllib.request
import uuid

import grpc
import h2.config
import h2.connection
import h2.events
import pyqwest
import pytest
from connectrpc.client import ConnectClientSync
from connectrpc.code import Code
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.errors import ConnectError
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.protocol import ProtocolType

from cluster_harness import Cluster, assert_clean_stop
from kindred.api.v1 import account_pb2, account_pb2_grpc, chat_pb2
from kindred.common.v1 import common_pb2

TIMEOUT = 30
PASSWORD = "correct horse battery staple"
ALLOWED_ORIGIN = "http://app.kindred.test"
HTTP1_TIMEOUT_MS = 1500


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_GATEWAY_CORS_ORIGINS=f"{ALLOWED_ORIGIN}, http://other.kindred.test",
                      KINDRED_GATEWAY_CORS_MAX_AGE_SECONDS="600", KINDRED_CHAT_HEARTBEAT_MS="500",
                      KINDRED_GATEWAY_WEB_HEADER_TIMEOUT_MS=str(HTTP1_TIMEOUT_MS),
                      KINDRED_GATEWAY_WEB_BODY_TIMEOUT_MS=str(HTTP1_TIMEOUT_MS))
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def user(cluster):
    """A signed-in member: (access token, GetAccount's answer over gRPC)."""
    community = f"web-{uuid.uuid4().hex[:8]}"
    email, username = f"w-{uuid.uuid4().hex[:10]}@example.com", f"w_{uuid.uuid4().hex[:10]}"
    with grpc.insecure_channel(cluster.gateway) as channel:
        accounts = account_pb2_grpc.AccountServiceStub(channel)
        accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=email, username=username,
                                                  password=PASSWORD), timeout=TIMEOUT)
        code = cluster.verification_code(email)
        accounts.VerifyEmail(account_pb2.VerifyEmailRequest(
            code=account_pb2.VerificationCode(community_id=community, email=email, code=code)), timeout=TIMEOUT)
        signed = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=PASSWORD),
                                 timeout=TIMEOUT)
        token = signed.tokens.access_token
        account = accounts.GetAccount(account_pb2.GetAccountRequest(),
                                      metadata=[("authorization", f"Bearer {token}")], timeout=TIMEOUT)
    return token, account


GET_ACCOUNT = MethodInfo(name="GetAccount", service_name="kindred.api.v1.AccountService",
                         input=account_pb2.GetAccountRequest, output=account_pb2.GetAccountResponse,
                         idempotency_level=IdempotencyLevel.NO_SIDE_EFFECTS, stream_type=StreamType.UNARY)
SUBSCRIBE = MethodInfo(name="Subscribe", service_name="kindred.api.v1.ChatService",
                       input=chat_pb2.SubscribeRequest, output=chat_pb2.SubscribeResponse,
                       idempotency_level=IdempotencyLevel.NO_SIDE_EFFECTS, stream_type=StreamType.SERVER_STREAM)


def connect_client(cluster, protocol=ProtocolType.CONNECT, codec=None, http1=False):
    """connectrpc's client over HTTP/2 with prior knowledge (the gateway's port is h2c in the cluster), or over
    HTTP/1.1, without compression (the gateway answers identity only)."""
    version = pyqwest.HTTPVersion.HTTP1 if http1 else pyqwest.HTTPVersion.HTTP2
    transport = pyqwest.SyncHTTPTransport(http_version=version)
    return ConnectClientSync(f"http://{cluster.gateway}", codec=codec or google_protobuf_binary_codec(),
                             protocol=protocol, accept_compression=[], send_compression=None,
                             http_client=pyqwest.SyncClient(transport), timeout_ms=TIMEOUT * 1000)


def bearer(token):
    return {"authorization": f"Bearer {token}"}


def h2_call(cluster, path, headers, body=b"", method="POST"):
    """One request on a fresh h2c connection with the `h2` library: (response headers, body bytes, trailers)."""
    host, port = cluster.gateway.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    connection = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    stream = connection.get_next_available_stream_id()
    request = [(":method", method), (":scheme", "http"), (":authority", cluster.gateway), (":path", path)]
    connection.send_headers(stream, request + list(headers), end_stream=not body)
    if body:
        connection.send_data(stream, body, end_stream=True)
    sock.sendall(connection.data_to_send())
    response, data, trailers, ended = {}, b"", {}, False
    try:
        while not ended:
            chunk = sock.recv(65536)
            if not chunk:
                break
            for event in connection.receive_data(chunk):
                if isinstance(event, h2.events.ResponseReceived):
                    response = {k.decode(): v.decode() for k, v in event.headers}
                elif isinstance(event, h2.events.DataReceived):
                    data += event.data
                    connection.acknowledge_received_data(event.flow_controlled_length, stream)
                elif isinstance(event, h2.events.TrailersReceived):
                    trailers = {k.decode(): v.decode() for k, v in event.headers}
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                    ended = True
            sock.sendall(connection.data_to_send())
    finally:
        sock.close()
    return response, data, trailers


def frames(data):
    """Splits length-prefixed frames: [(flag, body)]."""
    out = []
    while data:
        flag, length = struct.unpack(">BI", data[:5])
        out.append((flag, data[5:5 + length]))
        data = data[5 + length:]
    return out


def grpc_web_call(cluster, path, request, headers=()):
    """A gRPC-Web binary call framed by hand: (response headers, messages, trailers from the 0x80 frame)."""
    body = struct.pack(">BI", 0, len(request)) + request
    response, data, http2_trailers = h2_call(
        cluster, path, [("content-type", "application/grpc-web+proto"), ("x-grpc-web", "1"), *headers], body)
    assert not http2_trailers, "gRPC-Web carries its trailers in the body"
    messages, trailers = [], {}
    for flag, payload in frames(data):
        if flag & 0x80:
            for line in payload.decode().split("\r\n"):
                if line:
                    name, value = line.split(":", 1)
                    trailers[name.strip()] = value.strip()
        else:
            messages.append(payload)
    return response, messages, trailers


def error_detail(details) -> common_pb2.ErrorDetail:
    """The Kindred ErrorDetail among a Connect error's details."""
    for detail in details:
        if detail["type"] == "kindred.common.v1.ErrorDetail":
            return common_pb2.ErrorDetail.FromString(base64.b64decode(detail["value"] + "==="))
    raise AssertionError(f"no ErrorDetail in {details}")


def test_connect_unary_binary_with_connectrpc(cluster, user):
    token, account = user
    with connect_client(cluster) as client:
        answer = client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT,
                                      headers=bearer(token))
    assert answer == account
    assert answer.account.user_id


def test_connect_error_with_connectrpc(cluster):
    with connect_client(cluster) as client, pytest.raises(ConnectError) as raised:
        client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT)
    assert raised.value.code == Code.UNAUTHENTICATED
    [detail] = [d for d in raised.value.details if d.type_name == "kindred.common.v1.ErrorDetail"]
    parsed = common_pb2.ErrorDetail.FromString(detail.message_bytes)
    assert parsed.reason == "UNAUTHENTICATED" and parsed.request_id


def test_connect_server_streaming_with_connectrpc(cluster, user):
    token, _ = user
    with connect_client(cluster) as client:
        stream = client.execute_server_stream(request=chat_pb2.SubscribeRequest(), method=SUBSCRIBE,
                                              headers=bearer(token), timeout_ms=3000)
        events = []
        with pytest.raises(ConnectError) as raised:
            for event in stream:
                events.append(event)
    # Heartbeats every 500 ms, then the 3 s deadline ends the stream with DEADLINE_EXCEEDED in the
    # end-of-stream message.
    assert len(events) >= 2 and all(e.WhichOneof("event") == "heartbeat" for e in events)
    assert raised.value.code == Code.DEADLINE_EXCEEDED


def test_connect_streaming_error_with_connectrpc(cluster):
    with connect_client(cluster) as client, pytest.raises(ConnectError) as raised:
        for _ in client.execute_server_stream(request=chat_pb2.SubscribeRequest(), method=SUBSCRIBE):
            pass
    assert raised.value.code == Code.UNAUTHENTICATED


def test_connect_json_with_connectrpc(cluster, user):
    token, account = user
    with connect_client(cluster, codec=google_protobuf_json_codec()) as client:
        assert client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT,
                                    headers=bearer(token)) == account
        events = []
        with pytest.raises(ConnectError) as raised:
            for event in client.execute_server_stream(request=chat_pb2.SubscribeRequest(), method=SUBSCRIBE,
                                                      headers=bearer(token), timeout_ms=2000):
                events.append(event)
        assert raised.value.code == Code.DEADLINE_EXCEEDED
        assert events and all(e.WhichOneof("event") == "heartbeat" for e in events)
        with pytest.raises(ConnectError) as raised:
            client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT)
        assert raised.value.code == Code.UNAUTHENTICATED


def curl(cluster, path, body, *headers):
    """curl over HTTP/2 (prior knowledge, as the gateway's port is h2c in the cluster) with a JSON body, as the API
    reference's examples: (HTTP status, parsed JSON body)."""
    command = ["curl", "-sS", "--http2-prior-knowledge", "-o", "-", "-w", "\n%{http_code}",
               "-H", "content-type: application/json", "--data-binary", body]
    for header in headers:
        command += ["-H", header]
    result = subprocess.run(command + [f"http://{cluster.gateway}{path}"], capture_output=True, text=True,
                            timeout=TIMEOUT, check=True)
    text, status = result.stdout.rsplit("\n", 1)
    return int(status), json.loads(text)


def test_curl_connect_json(cluster, user):
    token, account = user
    path = "/kindred.api.v1.AccountService/GetAccount"
    status, body = curl(cluster, path, "{}", f"authorization: Bearer {token}")
    assert status == 200 and body["account"]["userId"] == account.account.user_id  # lowerCamelCase names
    # Errors: the code's HTTP status, the error JSON, and the ErrorDetail as a detail readable as JSON too.
    status, error = curl(cluster, path, "{}")
    assert status == 401 and error["code"] == "unauthenticated" and error["message"]
    [detail] = error["details"]
    assert detail["type"] == "kindred.common.v1.ErrorDetail"
    assert error_detail([detail]).reason == "UNAUTHENTICATED" == detail["debug"]["reason"]
    assert detail["debug"]["requestId"]
    # JSON the message does not fit is refused, naming what is wrong, before any handler runs.
    for bad in ('{"nope": 1}', "{", '{"username": 5}', "[]"):
        status, error = curl(cluster, "/kindred.api.v1.AccountService/CheckUsername", bad)
        assert status == 400 and error["code"] == "invalid_argument" and error["message"], (bad, error)
    status, answer = curl(cluster, "/kindred.api.v1.AccountService/CheckUsername",
                          json.dumps({"communityId": "web-curl", "username": f"u_{uuid.uuid4().hex[:10]}"}))
    assert status == 200 and answer.get("available") is True, answer


def test_grpc_web_with_connectrpc(cluster, user):
    token, account = user
    with connect_client(cluster, protocol=ProtocolType.GRPC_WEB) as client:
        assert client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT,
                                    headers=bearer(token)) == account
        with pytest.raises(ConnectError) as raised:
            client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT)
    assert raised.value.code == Code.UNAUTHENTICATED


def test_grpc_web_binary_hand_framed(cluster, user):
    token, account = user
    request = account_pb2.GetAccountRequest().SerializeToString()
    response, messages, trailers = grpc_web_call(cluster, "/kindred.api.v1.AccountService/GetAccount", request,
                                                 [("authorization", f"Bearer {token}")])
    assert response[":status"] == "200" and response["content-type"] == "application/grpc-web+proto"
    assert [account_pb2.GetAccountResponse.FromString(m) for m in messages] == [account]
    assert trailers["grpc-status"] == "0"


def test_connect_unary_binary_error_by_hand(cluster):
    """The Connect error as the protocol documents it: the HTTP status of the code and the error JSON."""
    response, body, _ = h2_call(cluster, "/kindred.api.v1.AccountService/GetAccount",
                                [("content-type", "application/proto"), ("connect-protocol-version", "1")])
    assert response[":status"] == "401" and response["content-type"] == "application/json"
    error = json.loads(body)
    assert error["code"] == "unauthenticated" and error["message"]
    assert error_detail(error["details"]).reason == "UNAUTHENTICATED"
    # Unknown methods are Connect's unimplemented (501); bad timeouts invalid_argument (400).
    response, body, _ = h2_call(cluster, "/kindred.api.v1.AccountService/Nope", [("content-type", "application/proto")])
    assert response[":status"] == "501" and json.loads(body)["code"] == "unimplemented"
    response, body, _ = h2_call(cluster, "/kindred.api.v1.AccountService/GetAccount",
                                [("content-type", "application/proto"), ("connect-timeout-ms", "soon")])
    assert response[":status"] == "400" and json.loads(body)["code"] == "invalid_argument"
    # Compression other than identity is refused with the encodings accepted.
    response, body, _ = h2_call(cluster, "/kindred.api.v1.AccountService/GetAccount",
                                [("content-type", "application/proto"), ("content-encoding", "br")], b"\x00")
    assert response[":status"] == "501" and response["accept-encoding"] == "identity"


@pytest.mark.parametrize("token_kind", ["valid", "missing", "garbage"])
def test_same_answer_on_every_protocol(cluster, user, token_kind):
    """GetAccount through gRPC (grpcio), gRPC-Web (by hand) and Connect binary and JSON (connectrpc) returns the same
    message, or the same code and ErrorDetail reason."""
    token = {"valid": user[0], "missing": None, "garbage": "not-a-token"}[token_kind]
    headers = [("authorization", f"Bearer {token}")] if token else []
    request = account_pb2.GetAccountRequest()
    answers = {}
    with grpc.insecure_channel(cluster.gateway) as channel:
        try:
            answers["grpc"] = account_pb2_grpc.AccountServiceStub(channel).GetAccount(
                request, metadata=headers, timeout=TIMEOUT)
        except grpc.RpcError as error:
            detail = dict(error.trailing_metadata()).get("kindred-error-bin")
            answers["grpc"] = (error.code().name, common_pb2.ErrorDetail.FromString(detail).reason)
    _, messages, trailers = grpc_web_call(cluster, "/kindred.api.v1.AccountService/GetAccount",
                                          request.SerializeToString(), headers)
    if trailers["grpc-status"] == "0":
        answers["grpc-web"] = account_pb2.GetAccountResponse.FromString(messages[0])
    else:
        code = grpc.StatusCode(next(c for c in grpc.StatusCode if c.value[0] == int(trailers["grpc-status"])))
        detail = base64.b64decode(trailers["kindred-error-bin"] + "===")
        answers["grpc-web"] = (code.name, common_pb2.ErrorDetail.FromString(detail).reason)
    for name, codec in (("connect", google_protobuf_binary_codec()), ("connect-json", google_protobuf_json_codec())):
        with connect_client(cluster, codec=codec) as client:
            try:
                answers[name] = client.execute_unary(request=request, method=GET_ACCOUNT, headers=dict(headers))
            except ConnectError as error:
                [detail] = [d for d in error.details if d.type_name == "kindred.common.v1.ErrorDetail"]
                answers[name] = (error.code.name, common_pb2.ErrorDetail.FromString(detail.message_bytes).reason)
    assert answers["grpc"] == answers["grpc-web"] == answers["connect"] == answers["connect-json"], answers
    if token_kind != "valid":
        assert answers["grpc"] == ("UNAUTHENTICATED", "UNAUTHENTICATED")


def test_cors_preflight(cluster):
    path = "/kindred.api.v1.AccountService/GetAccount"
    asked = [("access-control-request-method", "POST"),
             ("access-control-request-headers", "authorization,content-type,connect-protocol-version")]
    response, _, _ = h2_call(cluster, path, [("origin", ALLOWED_ORIGIN), *asked], method="OPTIONS")
    assert response[":status"] == "204"
    assert response["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert response["access-control-max-age"] == "600"
    allowed = {h.strip() for h in response["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "connect-protocol-version", "connect-timeout-ms",
            "x-grpc-web", "grpc-timeout"} <= allowed
    assert "access-control-allow-credentials" not in response
    # An origin not on the list gets no CORS headers.
    response, _, _ = h2_call(cluster, path, [("origin", "http://evil.example"), *asked], method="OPTIONS")
    assert response[":status"] == "403" and "access-control-allow-origin" not in response


def test_cors_headers_on_responses(cluster):
    path = "/kindred.api.v1.AccountService/GetAccount"
    response, _, _ = h2_call(cluster, path, [("content-type", "application/proto"), ("origin", ALLOWED_ORIGIN)])
    assert response[":status"] == "401"
    assert response["access-control-allow-origin"] == ALLOWED_ORIGIN
    exposed = {h.strip() for h in response["access-control-expose-headers"].split(",")}
    assert {"grpc-status", "grpc-message", "grpc-status-details-bin", "x-request-id"} <= exposed
    response, _, _ = h2_call(cluster, path, [("content-type", "application/proto"), ("origin", "http://evil.example")])
    assert "access-control-allow-origin" not in response


# HTTP/1.1 on the same port: the first bytes choose the protocol.

def http1(cluster, path, body=b"", headers=None, method="POST"):
    """One HTTP/1.1 request with Python's http.client: (status, headers, body)."""
    host, port = cluster.gateway.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, answer


@pytest.mark.parametrize("codec", ["proto", "json"])
def test_http1_with_connectrpc(cluster, user, codec):
    token, account = user
    chosen = google_protobuf_json_codec() if codec == "json" else google_protobuf_binary_codec()
    with connect_client(cluster, codec=chosen, http1=True) as client:
        assert client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT,
                                    headers=bearer(token)) == account
        with pytest.raises(ConnectError) as raised:
            client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT)
        assert raised.value.code == Code.UNAUTHENTICATED
        # Server streaming over a chunked response.
        events = []
        with pytest.raises(ConnectError) as raised:
            for event in client.execute_server_stream(request=chat_pb2.SubscribeRequest(), method=SUBSCRIBE,
                                                      headers=bearer(token), timeout_ms=2000):
                events.append(event)
        assert raised.value.code == Code.DEADLINE_EXCEEDED
        assert events and all(e.WhichOneof("event") == "heartbeat" for e in events)
    with connect_client(cluster, protocol=ProtocolType.GRPC_WEB, http1=True) as client:
        assert client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT,
                                    headers=bearer(token)) == account


def test_http1_connect_json_and_grpc_web_by_hand(cluster, user):
    token, account = user
    path = "/kindred.api.v1.AccountService/GetAccount"
    status, headers, body = http1(cluster, path, b"{}", {"content-type": "application/json",
                                                         "authorization": f"Bearer {token}", "origin": ALLOWED_ORIGIN})
    assert status == 200 and json.loads(body)["account"]["userId"] == account.account.user_id
    assert headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    status, headers, body = http1(cluster, path, b"{}", {"content-type": "application/json"})
    assert status == 401 and json.loads(body)["code"] == "unauthenticated"
    request = struct.pack(">BI", 0, 0)
    status, headers, body = http1(cluster, path, request, {"content-type": "application/grpc-web+proto",
                                                           "authorization": f"Bearer {token}"})
    assert status == 200 and headers["content-type"] == "application/grpc-web+proto"
    [(first, message), (last, trailer)] = frames(body)
    assert (first, last) == (0, 0x80)
    assert account_pb2.GetAccountResponse.FromString(message) == account and b"grpc-status: 0" in trailer
    # gRPC proper needs HTTP/2; a CORS preflight works over HTTP/1.1 too.
    status, _, _ = http1(cluster, path, request, {"content-type": "application/grpc"})
    assert status == 415
    status, headers, _ = http1(cluster, path, method="OPTIONS", headers={
        "origin": ALLOWED_ORIGIN, "access-control-request-method": "POST"})
    assert status == 204 and headers["access-control-allow-origin"] == ALLOWED_ORIGIN


def test_http1_keep_alive(cluster):
    """Several requests on one connection, answered in order."""
    host, port = cluster.gateway.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)
    for _ in range(3):
        connection.request("POST", "/kindred.api.v1.AccountService/GetAccount", body=b"{}",
                           headers={"content-type": "application/json"})
        response = connection.getresponse()
        assert response.status == 401 and json.loads(response.read())["code"] == "unauthenticated"
    connection.close()


def raw(cluster, data: bytes, wait=3.0):
    """Sends raw bytes on a new connection: (what came back, whether the server closed the connection)."""
    host, port = cluster.gateway.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    sock.sendall(data)
    sock.settimeout(wait)
    received, closed = b"", False
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            received += chunk
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    sock.close()
    return received, closed


SMUGGLING = {
    "content-length and chunked": b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two content-lengths": b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
    "obs-fold": b"POST /x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n b\r\nContent-Length: 0\r\n\r\n",
    "bad chunk size": b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
    "space before colon": b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\nabc",
    "chunked not last": b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("attempt", sorted(SMUGGLING))
def test_http1_smuggling_refused(cluster, attempt):
    received, closed = raw(cluster, SMUGGLING[attempt] + b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 400"), received[:200]
    assert received.count(b"HTTP/1.1 ") == 1 and closed


def test_http1_oversized_header_refused(cluster):
    request = (b"POST /kindred.api.v1.AccountService/GetAccount HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
               + b"X-Big: " + b"a" * 20000 + b"\r\nContent-Length: 2\r\n\r\n{}")
    received, closed = raw(cluster, request)
    assert received.startswith(b"HTTP/1.1 400") and closed, received[:200]


def test_http1_slow_clients_cut(cluster):
    started = time.monotonic()
    # A header that never ends, a body that never comes, a request line cut short: each closed at its deadline (a
    # connection silent from the start, or stopped inside what could be the HTTP/2 preface, meets HTTP/2's
    # handshake timeout instead).
    cases = [b"POST /kindred.api.v1.AccountService/GetAccount HTTP/1.1\r\nHost: a\r\n",
             b"POST /kindred.api.v1.AccountService/GetAccount HTTP/1.1\r\nHost: a\r\nContent-Type: application/json"
             b"\r\nContent-Length: 100\r\n\r\n{",
             b"POST /kindred.api.v1.Acc"]
    for data in cases:
        received, closed = raw(cluster, data, wait=HTTP1_TIMEOUT_MS / 1000 + 5)
        assert closed and not received.startswith(b"HTTP/1.1 200"), (data, received[:100])
    assert time.monotonic() - started < 3 * (HTTP1_TIMEOUT_MS / 1000 + 5)
    # The deadline is measured: the gateway's admin port counts the closed connections.
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{cluster.admin_port('gateway')}/metrics", timeout=5).read()
    assert b'port="web"' in metrics


# Connect GET: side-effect-free unary calls (marked NO_SIDE_EFFECTS in the protos) as plain HTTP GETs.

@pytest.mark.parametrize("codec", ["proto", "json"])
@pytest.mark.parametrize("over_http1", [False, True])
def test_connect_get_with_connectrpc(cluster, user, codec, over_http1):
    token, account = user
    chosen = google_protobuf_json_codec() if codec == "json" else google_protobuf_binary_codec()
    with connect_client(cluster, codec=chosen, http1=over_http1) as client:
        assert client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT,
                                    headers=bearer(token), use_get=True) == account
        with pytest.raises(ConnectError) as raised:
            client.execute_unary(request=account_pb2.GetAccountRequest(), method=GET_ACCOUNT, use_get=True)
        assert raised.value.code == Code.UNAUTHENTICATED


def curl_get(cluster, path, *arguments):
    """curl --get over HTTP/1.1: (HTTP status, body text, headers text)."""
    command = ["curl", "-sS", "--http1.1", "--get", "-i", *arguments, f"http://{cluster.gateway}{path}"]
    result = subprocess.run(command, capture_output=True, timeout=TIMEOUT, check=True)
    head, _, body = result.stdout.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode("latin-1"), head.decode().lower()


def test_connect_get_with_curl(cluster, user):
    token, account = user
    status, body, _ = curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount",
                               "--data-urlencode", "encoding=json", "--data-urlencode", "message={}",
                               "-H", f"authorization: Bearer {token}")
    assert status == 200 and json.loads(body)["account"]["userId"] == account.account.user_id
    # base64url of the binary message, and the optional connect=v1.
    message = base64.urlsafe_b64encode(account_pb2.GetAccountRequest().SerializeToString()).decode()
    status, body, head = curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount", "--data",
                                  f"connect=v1&encoding=proto&base64=1&message={message}",
                                  "-H", f"authorization: Bearer {token}")
    assert status == 200 and "content-type: application/proto" in head
    assert account_pb2.GetAccountResponse.FromString(body.encode("latin-1")) == account
    # A message the method's type does not fit is refused like a POST's.
    status, body, _ = curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount",
                               "--data-urlencode", "encoding=json", "--data-urlencode", 'message={"nope":1}',
                               "-H", f"authorization: Bearer {token}")
    assert status == 400 and json.loads(body)["code"] == "invalid_argument"


def test_connect_get_refusals(cluster, user):
    token, _ = user
    # A method with side effects (not marked NO_SIDE_EFFECTS) never takes GET: 405, and nothing runs.
    status, _, _ = curl_get(cluster, "/kindred.api.v1.AccountService/SignOut", "--data", "encoding=json&message={}",
                            "-H", f"authorization: Bearer {token}")
    assert status == 405
    status, _, _ = curl_get(cluster, "/kindred.api.v1.AccountService/CheckUsername", "--data",
                            "encoding=json&message={}")
    assert status == 405
    status, body, _ = curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount", "--data",
                               "encoding=json&message={}", "-H", f"authorization: Bearer {token}")
    assert status == 200, "the same session still works: SignOut did not run"
    # No or an unknown encoding: 415; a bad protocol version, bad base64, compression we do not serve: Connect errors.
    assert curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount", "--data", "message={}")[0] == 415
    assert curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount", "--data", "encoding=xml")[0] == 415
    status, body, _ = curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount", "--data",
                               "connect=v2&encoding=json&message={}")
    assert status == 400 and json.loads(body)["code"] == "invalid_argument"
    status, body, _ = curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount", "--data",
                               "encoding=proto&base64=1&message=%21%21")
    assert status == 400 and json.loads(body)["code"] == "invalid_argument"
    status, body, _ = curl_get(cluster, "/kindred.api.v1.AccountService/GetAccount", "--data",
                               "encoding=json&compression=gzip&message={}")
    assert status == 501 and json.loads(body)["code"] == "unimplemented"
    status, body, _ = curl_get(cluster, "/kindred.api.v1.AccountService/Nope", "--data", "encoding=json&message={}")
    assert status == 501 and json.loads(body)["code"] == "unimplemented"
    # Streaming methods take no GET.
    assert curl_get(cluster, "/kindred.api.v1.ChatService/Subscribe", "--data", "encoding=json&message={}")[0] == 405


def test_plain_http_refusals_carry_the_mapped_grpc_status(cluster):
    """Over HTTP/2, a method other than POST/GET and a content type the port does not serve answer 405 and 415 with
    the grpc-status gRPC's HTTP mapping gives those statuses (UNKNOWN), not INTERNAL."""
    path = "/kindred.api.v1.AccountService/GetAccount"
    response, _, _ = h2_call(cluster, path, [("content-type", "text/plain")], body=b"x")
    assert response[":status"] == "415" and response["grpc-status"] == "2"
    response, _, _ = h2_call(cluster, path, [("content-type", "application/grpc")], method="PUT")
    assert response[":status"] == "405" and response["grpc-status"] == "2"
    # An HTTP/2 GET reaches Connect GET (a refusal of a POST-only method is 405 too).
    response, _, _ = h2_call(cluster, "/kindred.api.v1.AccountService/SignOut?encoding=json&message=%7B%7D", [],
                             method="GET")
    assert response[":status"] == "405"
