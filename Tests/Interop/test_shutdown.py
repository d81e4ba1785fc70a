"""Graceful shutdown in two phases, seen from the wire: a stream the client opens while the server's shutdown
begins (after the first GOAWAY, before it answered the PING) is served, not refused.

The client is a raw frame writer (abuse_client.Attacker; python-h2 refuses to open a stream once it has seen a
GOAWAY, which is exactly the race a real client loses when its request crosses the GOAWAY on the wire)."""

import signal
import struct

import hpack
import pytest

from abuse_client import ACK, DATA, ECHO, END_STREAM, GOAWAY, HEADERS, PING, RST_STREAM, SETTINGS, Attacker, \
    echo_request, frame, grpc_message
from conftest import RunningServer

MAX_STREAM_ID = 0x7FFFFFFF


class Client(Attacker):
    """Keeps the server's header blocks decoded in order (one HPACK context per connection)."""

    def __init__(self, port):
        super().__init__(port)
        self.decoder = hpack.Decoder()
        self.responses = {}  # stream -> {"headers": [...], "data": bytes, "reset": code}

    def next_frame(self, timeout=5):
        found, _ = self.read_frames(lambda f: True, timeout)
        if found is None:
            return None
        kind, flags, stream, payload = found
        response = self.responses.setdefault(stream, {"headers": [], "data": b"", "reset": None})
        if kind == HEADERS:
            response["headers"] += self.decoder.decode(payload)
        elif kind == DATA:
            response["data"] += payload
        elif kind == RST_STREAM:
            response["reset"] = struct.unpack(">I", payload)[0]
        elif kind == SETTINGS and not flags & ACK:
            self.send(frame(SETTINGS, ACK, 0))
        return found

    def call_echo(self, text):
        return self.open_stream(ECHO, grpc_message(echo_request(text.encode())))

    def finished(self, stream):
        response = self.responses.get(stream)
        return response is not None and (response["reset"] is not None or
                                         any(name == "grpc-status" for name, _ in response["headers"]))


def test_stream_opened_during_shutdown_is_served():
    server = RunningServer("--abuse-penalty", "0")
    client = Client(server.port)
    try:
        first = client.call_echo("before")
        while not client.finished(first):
            assert client.next_frame() is not None, "no answer to the first call"

        server.process.send_signal(signal.SIGTERM)
        goaway = None
        while goaway is None:
            found = client.next_frame()
            assert found is not None, "no GOAWAY after SIGTERM"
            if found[0] == GOAWAY:
                goaway = found
        last_stream, code = struct.unpack(">II", goaway[3][:8])
        assert (last_stream & MAX_STREAM_ID, code) == (MAX_STREAM_ID, 0), \
            f"the first GOAWAY must name the maximum stream id, got {last_stream}"

        # The request crosses the GOAWAY on the wire: sent before the client answers the PING that follows it.
        try:
            late = client.call_echo("during shutdown")
        except (ConnectionResetError, BrokenPipeError):
            pytest.fail("the server closed the connection one tick after its first GOAWAY: the late stream was lost")
        pings = []
        final_goaway = None
        while not client.finished(late):
            found = client.next_frame()
            assert found is not None, "the stream opened during shutdown got no answer (refused or ignored)"
            kind, flags, _, payload = found
            if kind == PING and not flags & ACK:
                pings.append(payload)
                client.send(frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                final_goaway = struct.unpack(">II", payload[:8])

        response = client.responses[late]
        assert response["reset"] is None, f"the late stream was reset with code {response['reset']}"
        assert (b"grpc-status", b"0") in [(bytes(n, "ascii") if isinstance(n, str) else n,
                                           bytes(v, "ascii") if isinstance(v, str) else v)
                                          for n, v in response["headers"]]
        assert b"during shutdown" in response["data"]
        # The final GOAWAY names the late stream as the last one processed.
        while final_goaway is None:
            found = client.next_frame()
            assert found is not None, "no final GOAWAY"
            kind, flags, _, payload = found
            if kind == PING and not flags & ACK:
                pings.append(payload)
                client.send(frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                final_goaway = struct.unpack(">II", payload[:8])
        assert pings, "the first GOAWAY was not followed by a PING"
        assert final_goaway == (late, 0)
    finally:
        client.close()
        assert server.stop() == 0
