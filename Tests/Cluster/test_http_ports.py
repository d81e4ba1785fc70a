"""The cluster's plain HTTP/1.1 ports (the gateway's media port, every server's admin port) under slow clients:
connections that send part of a request header, trickle it, or stop in the body are closed at their timeout,
connections past the cap are closed as they are accepted, and a normal request is still answered; HTTP/1.1
connections on the gateway's gRPC port (Connect, gRPC-Web) have a cap too. Short limits here (1 s, a cap of 8) so
the test takes seconds; the defaults are 10 s / 30 s / 60 s and 2048 (media), 64 (admin), 4096 (web)."""

import re
import socket
import time
import urllib.request

import pytest

from cluster_config import ADMIN_PORT_OFFSET
from cluster_harness import Cluster, assert_clean_stop

CAP = 8
LIMITS = {"HEADER_TIMEOUT_MS": "1000", "BODY_TIMEOUT_MS": "1000", "IDLE_TIMEOUT_MS": "1500", "MAX_CONNECTIONS": str(CAP)}


@pytest.fixture(scope="module")
def cluster():
    env = {f"KINDRED_GATEWAY_MEDIA_{key}": value for key, value in LIMITS.items()}
    env.update({f"KINDRED_GATEWAY_ADMIN_{key}": value for key, value in LIMITS.items()})
    env.update({f"KINDRED_GATEWAY_WEB_{key}": value for key, value in LIMITS.items()})
    running = Cluster(**env)
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


def connect(port, data=b""):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if data:
        sock.sendall(data)
    return sock


def closed_within(sock, seconds) -> bool:
    """Whether the server closed the connection within `seconds` (reading and dropping what it sent)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def answer(port, path) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def metrics(cluster) -> str:
    """The gateway's metrics, read on a connection the server closes (`Connection: close`, read to its end): once
    this returns, the server has let that connection go, so it no longer holds one of the admin port's places."""
    with connect(cluster.admin_port("gateway"), b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") as sock:
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return body.decode()


def wait_until_no_connection_is_held(cluster, label):
    """Waits until the port holds no connection but the one reading the metrics (admin) or none (media): the count
    below is exact, and a connection the previous case (or its metrics read) left open would take a place."""
    own = 1 if label == "admin" else 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = re.search(rf'^http_connections_open{{port="{label}"}} (\S+)$', metrics(cluster), re.MULTILINE)
        if found is not None and float(found.group(1)) <= own:
            return
        time.sleep(0.1)
    raise AssertionError(f"the {label} port still holds connections from before the test")


@pytest.mark.parametrize("port_name", ["media", "gateway admin"])
def test_slow_clients_are_closed_and_capped_while_a_normal_request_is_answered(cluster, port_name):
    port = cluster.base + 2 * ADMIN_PORT_OFFSET if port_name == "media" else cluster.admin_port("gateway")
    label = "media" if port_name == "media" else "admin"
    wait_until_no_connection_is_held(cluster, label)
    # A bad signature is answered 403 by the media port; /healthz 200 by the admin port.
    path, expected = ("/media/v1/x/1/small.jpeg?exp=1&sig=x", 403) if port_name == "media" else ("/healthz", 200)
    started = time.monotonic()
    slow = [connect(port, b"GET / HTTP/1.1\r\nHo") for _ in range(3)]  # a partial header
    slow += [connect(port) for _ in range(2)]  # silent
    slow.append(connect(port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123"))  # a short body
    trickled = connect(port, b"G")
    assert answer(port, path) == expected, "a normal request was not answered beside slow ones"
    # 7 held (the normal request's connection closed): one more place, then the cap.
    last = connect(port, b"GE")
    refused = connect(port)
    assert closed_within(refused, 1), "a connection past the cap was kept"
    for byte in b"ET / HTTP/1.1\r\n":
        trickled.sendall(bytes([byte]))
        time.sleep(0.05)
    for sock in slow + [trickled, last]:
        assert closed_within(sock, 4), "a slow connection outlived its timeout"
        sock.close()
    assert time.monotonic() - started >= 0.9, "closed before the timeout"
    assert answer(port, path) == expected, "the port did not serve again once the slow connections were gone"
    text = metrics(cluster)
    assert f'http_connections_refused_total{{port="{label}"}}' in text
    assert f'http_timeouts_total{{port="{label}",timeout="header"}}' in text


@pytest.mark.parametrize("port_name", ["media", "gateway admin"])
def test_a_malformed_request_gets_one_400_and_the_connection_closes(cluster, port_name):
    """Found by Tests/Fuzz's FuzzHTTP1: after a request the decoder refuses, these ports answered 400 twice (the
    decoder read the rest again) and kept the connection open until its header deadline; and an HTTP/1.0 request
    with Transfer-Encoding (faulty framing, RFC 9112 §6.1) was served as chunked instead of refused."""
    port = cluster.base + 2 * ADMIN_PORT_OFFSET if port_name == "media" else cluster.admin_port("gateway")
    good = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    http10_chunked = b"POST /healthz HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n"
    for request in (b"OPTIONS /kindttps://app.example.com\r\nOrigin: x\r\n\r\n", good + b"GET / HTTP/1.1\r\nHost: \x00\r\n\r\n",
                    good + http10_chunked):
        sock = connect(port, request)
        started = time.monotonic()
        received = b""
        sock.settimeout(5)
        while True:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            received += chunk
        elapsed = time.monotonic() - started
        sock.close()
        statuses = re.findall(rb"^HTTP/1\.1 (\d{3})", received, re.MULTILINE)
        assert statuses.count(b"400") == 1 and statuses[-1] == b"400", statuses
        # The port's header deadline here is 1 s: a connection left open would be cut only then.
        assert elapsed < 0.9, f"the connection stayed open {elapsed:.1f} s after the 400"


def open_connections(cluster, label) -> float:
    found = re.search(rf'^http_connections_open{{port="{label}"}} (\S+)$', metrics(cluster), re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def wait_for_open_connections(cluster, label, count):
    deadline = time.monotonic() + 10
    while open_connections(cluster, label) != count:
        assert time.monotonic() < deadline, f"the {label} port holds {open_connections(cluster, label)}, not {count}"
        time.sleep(0.05)


def test_http1_connections_on_the_gateway_port_are_capped(cluster):
    """The gateway's gRPC port takes HTTP/1.1 too (its first bytes decide): past the cap such a connection is closed
    before its request is read, while HTTP/2 connections do not count."""
    port = cluster.port("gateway")
    wait_for_open_connections(cluster, "web", 0)
    held = [connect(port, b"POST /x HTTP/1.1\r\nHo") for _ in range(CAP)]  # a partial header each
    wait_for_open_connections(cluster, "web", CAP)
    request = (b"POST /kindred.api.v1.AccountService/GetAccount HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    refused = connect(port, request)
    refused.settimeout(3)
    try:
        answered = refused.recv(65536)
    except (ConnectionResetError, BrokenPipeError):
        answered = b""
    assert answered == b"", "a connection past the cap was answered"
    refused.close()
    for sock in held:
        sock.close()
    wait_for_open_connections(cluster, "web", 0)
    answer_sock = connect(port, request)
    answer_sock.settimeout(5)
    assert answer_sock.recv(65536).startswith(b"HTTP/1.1 401"), "the port did not serve again below the cap"
    answer_sock.close()
    assert 'http_connections_refused_total{port="web"}' in metrics(cluster)
