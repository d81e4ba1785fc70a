"""Robustness of the Kindred gRPC runtime against raw HTTP/2 peers (python-h2, h2load)."""

import shutil
import socket
import struct
import subprocess
import time

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import pytest

from kindred.testing.v1 import interop_pb2 as pb
from kindred.testing.v1 import interop_pb2_grpc as rpc

ECHO = "/kindred.testing.v1.InteropService/Echo"
COLLECT = "/kindred.testing.v1.InteropService/Collect"


def frame(message: bytes) -> bytes:
    return struct.pack(">BI", 0, len(message)) + message


class RawConnection:
    """A plain h2c client connection driven by python-h2."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.events = []

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path, body=b"", content_type="application/grpc", end=True, method="POST"):
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, [(":method", method), (":scheme", "http"), (":path", path),
                                           (":authority", "localhost"), ("content-type", content_type),
                                           ("te", "trailers")], end_stream=end and not body)
        if body:
            self.conn.send_data(stream_id, body, end_stream=end)
        self.flush()
        return stream_id

    def receive_until(self, predicate, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.events):
                return self.events
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not data:
                break
            self.events.extend(self.conn.receive_data(data))
            self.flush()
        return self.events

    def response(self, stream_id):
        """Headers merged with trailers, for one stream, once it ended."""
        def ended(events):
            return any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)) and e.stream_id == stream_id
                       for e in events)
        events = self.receive_until(ended)
        headers = {}
        for event in events:
            if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)) and event.stream_id == stream_id:
                headers.update(dict(event.headers))
        return headers

    def close(self):
        self.sock.close()


def stats(server):
    with grpc.insecure_channel(server.address) as channel:
        return rpc.InteropServiceStub(channel).GetServerStats(pb.ServerStatsRequest())


def wait_until_quiet(server, baseline_connections=0):
    for _ in range(100):
        current = stats(server)
        if current.active_calls == 1 and current.open_connections <= baseline_connections + 1:
            return current
        time.sleep(0.05)
    raise AssertionError(f"server did not settle: {current}")


def test_server_stats_count_an_echo_in_flight(server):
    wait_until_quiet(server)
    with grpc.insecure_channel(server.address) as channel:
        future = rpc.InteropServiceStub(channel).Echo.future(pb.EchoRequest(message="slow", delay_ms=2000))
        seen = []
        for _ in range(75):
            seen.append(stats(server).active_calls)
            if seen[-1] == 2:  # the echo and this stats call
                break
            time.sleep(0.02)
        assert seen[-1] == 2, f"the echo in flight was not counted: {seen}"
        assert future.result(timeout=10).message == "slow"
    wait_until_quiet(server)


@pytest.mark.parametrize("path, message", [
    (COLLECT, pb.EchoRequest(fail_with_code=3, fail_with_message="no").SerializeToString()),  # the handler fails
    ("/kindred.testing.v1.InteropService/Missing", b""),  # UNIMPLEMENTED before any handler
])
def test_an_answer_before_the_request_ended_is_followed_by_rst_stream_no_error(server, path, message):
    """gRPC over HTTP/2 (and RFC 9113 section 8.1): a server that sends its status while the client is still
    sending resets the stream with NO_ERROR, so the client stops sending and both sides free the stream."""
    raw = RawConnection(server.port)
    stream = raw.request(path, frame(message), end=False)
    events = raw.receive_until(lambda events: any(
        isinstance(e, h2.events.StreamReset) and e.stream_id == stream for e in events), timeout=5)
    ended = [e for e in events if isinstance(e, h2.events.StreamEnded) and e.stream_id == stream]
    resets = [e for e in events if isinstance(e, h2.events.StreamReset) and e.stream_id == stream]
    assert ended, f"no status: {events}"
    assert [e.error_code for e in resets] == [0], f"expected RST_STREAM NO_ERROR after the status: {events}"
    assert events.index(ended[0]) < events.index(resets[0])
    raw.close()


def test_wrong_content_type_is_415(server):
    raw = RawConnection(server.port)
    stream = raw.request(ECHO, frame(b""), content_type="text/plain")
    assert raw.response(stream)[":status"] == "415"
    raw.close()


def test_get_is_405(server):
    raw = RawConnection(server.port)
    stream = raw.request(ECHO, method="GET")
    assert raw.response(stream)[":status"] == "405"
    raw.close()


def test_malformed_protobuf_is_invalid_argument(server):
    raw = RawConnection(server.port)
    stream = raw.request(ECHO, frame(b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
    headers = raw.response(stream)
    assert headers["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])
    raw.close()


@pytest.mark.parametrize("body", [b"\x00\x00\x00", b"\x00\x00\x00\x00\x10abc"])
def test_truncated_message_is_internal(server, body):
    raw = RawConnection(server.port)
    stream = raw.request(ECHO, body)
    assert raw.response(stream)["grpc-status"] == str(grpc.StatusCode.INTERNAL.value[0])
    raw.close()


def test_unknown_service_is_unimplemented_trailers_only(server):
    raw = RawConnection(server.port)
    stream = raw.request("/no.Such/Method", frame(b""))
    headers = raw.response(stream)
    assert headers[":status"] == "200"
    assert headers["grpc-status"] == str(grpc.StatusCode.UNIMPLEMENTED.value[0])
    raw.close()


def test_abrupt_disconnect_mid_stream_leaks_nothing(server):
    baseline = wait_until_quiet(server)
    for _ in range(20):
        raw = RawConnection(server.port)
        raw.request(COLLECT, frame(pb.EchoRequest(message="a").SerializeToString()) + b"\x00\x00\x00\x10", end=False)
        raw.request(ECHO, frame(pb.EchoRequest(delay_ms=5000).SerializeToString()))
        raw.sock.close()
    after = wait_until_quiet(server, baseline.open_connections)
    assert after.active_calls == 1


def test_rapid_reset_flood_is_cut_off(server):
    raw = RawConnection(server.port)
    cut_off = False
    try:
        for _ in range(5000):
            stream = raw.request(ECHO, frame(pb.EchoRequest(delay_ms=1000).SerializeToString()))
            raw.conn.reset_stream(stream)
            raw.flush()
    except (BrokenPipeError, ConnectionResetError, h2.exceptions.ProtocolError):
        cut_off = True
    if not cut_off:
        events = raw.receive_until(lambda evs: any(isinstance(e, h2.events.ConnectionTerminated) for e in evs))
        cut_off = any(isinstance(e, h2.events.ConnectionTerminated) for e in events)
    raw.close()
    assert cut_off, "the server kept accepting a reset flood"
    wait_until_quiet(server)


def test_ping_flood_gets_enhance_your_calm(server):
    raw = RawConnection(server.port)
    for i in range(10):
        raw.conn.ping(struct.pack(">Q", i))
    raw.flush()
    events = raw.receive_until(lambda evs: any(isinstance(e, h2.events.ConnectionTerminated) for e in evs))
    terminated = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    assert terminated and terminated[0].error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    raw.close()


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load (nghttp2-client) is not installed")
def test_h2load_flood_then_still_serving(server, tmp_path):
    body = tmp_path / "echo.bin"
    body.write_bytes(frame(pb.EchoRequest(message="flood").SerializeToString()))
    rss_before = server.resident_bytes()
    result = subprocess.run(
        ["timeout", "120", "h2load", "-n", "50000", "-c", "8", "-m", "100", "-d", str(body),
         "-H", "content-type: application/grpc", "-H", "te: trailers", f"http://{server.address}{ECHO}"],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "50000 succeeded" in result.stdout, result.stdout
    after = wait_until_quiet(server)
    assert after.active_calls == 1
    assert server.resident_bytes() - rss_before < 64 * 1024 * 1024
    with grpc.insecure_channel(server.address) as channel:
        assert rpc.InteropServiceStub(channel).Echo(pb.EchoRequest(message="still")).message == "still"
