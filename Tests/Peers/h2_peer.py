"""What the push provider peers share: an HTTP/2 server over TLS (the `h2` package on asyncio's TLS), per-target
answer rules read from a JSON file, a record of every request as JSON lines, and JWT helpers over `cryptography`.

A peer's handler gets a Request and returns a Response (or None to answer later with `Request.respond`).

One Python event loop carries about a thousand pushes a second, less than the provider under test sends. A peer
that keeps no state between requests (the APNs peer) can serve with several processes (`serve(..., processes=N)`):
each its own event loop and listening socket on the same port (SO_REUSEPORT, so the kernel spreads connections over
them by their addresses), all appending to the one record file. Connection ids then start at 1,000,000 × the
process's index, and a rule's "times" counts per process."""
import argparse
import asyncio
import base64
import ctypes
import itertools
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.settings


class Request:
    def __init__(self, protocol, stream_id, headers):
        self.protocol = protocol
        self.stream_id = stream_id
        self.headers = headers
        self.body = bytearray()
        self.connection_id = protocol.connection_id
        self.open_streams = 0

    @property
    def method(self):
        return self.headers.get(":method", "")

    @property
    def path(self):
        return self.headers.get(":path", "")

    def respond(self, response):
        self.protocol.send_response(self.stream_id, response)


class Response:
    def __init__(self, status, body=b"", headers=None):
        self.status = status
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.headers = headers or []


class Recorder:
    """Appends one JSON document per line to a file, so that a test in another process can read what arrived."""

    def __init__(self, path):
        # One write(2) per line on an O_APPEND descriptor: the processes of a peer share the file, and a line
        # lands whole at its end whichever process writes it.
        self.descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None
        self.lock = threading.Lock()

    def record(self, entry):
        if self.descriptor is None:
            return
        entry.setdefault("time", time.time())
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        with self.lock:
            os.write(self.descriptor, line)


class Rules:
    """Answers a test asks for, per target (device or registration token), from a JSON file re-read when it
    changes: {"<token>": {"status": 410, "reason": "Unregistered", "retry_after": 5, "times": 2, "delay_ms": 100}}.
    "*" applies to every target without a rule of its own. A rule with "times" applies that many times, then the
    target is answered normally again (a provider outage that ends)."""

    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.rules = {}
        self.used = {}

    def _reload(self):
        if not self.path:
            return
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            self.rules, self.mtime = {}, None
            return
        if mtime != self.mtime:
            with open(self.path) as handle:
                self.rules = json.load(handle)
            self.mtime = mtime
            self.used = {}

    def for_target(self, target):
        self._reload()
        key = target if target in self.rules else "*"
        rule = self.rules.get(key)
        if rule is None:
            return None
        times = rule.get("times")
        if times is not None:
            used = self.used.get(key, 0)
            if used >= times:
                return None
            self.used[key] = used + 1
        return rule


_connection_ids = itertools.count(1)


class H2Protocol(asyncio.Protocol):
    def __init__(self, handler, max_concurrent_streams):
        self.handler = handler
        self.connection_id = next(_connection_ids)
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.max_concurrent_streams = max_concurrent_streams
        self.requests = {}
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self.conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_concurrent_streams,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
            },
        )
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(1 << 24)
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data):
        try:
            events = self.conn.receive_data(data)
        except Exception:
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.requests[event.stream_id] = Request(self, event.stream_id, dict(event.headers))
            elif isinstance(event, h2.events.DataReceived):
                request = self.requests.get(event.stream_id)
                if request is not None:
                    request.body += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                request = self.requests.get(event.stream_id)
                if request is not None:
                    request.open_streams = len(self.requests)
                    response = self.handler(request)
                    if response is not None:
                        self.send_response(event.stream_id, response)
            elif isinstance(event, h2.events.StreamReset):
                self.requests.pop(event.stream_id, None)
        self.flush()

    def send_response(self, stream_id, response):
        if self.requests.pop(stream_id, None) is None:
            return
        headers = [(":status", str(response.status))] + list(response.headers)
        headers.append(("content-length", str(len(response.body))))
        try:
            if response.body:
                self.conn.send_headers(stream_id, headers)
                self.conn.send_data(stream_id, response.body, end_stream=True)
            else:
                self.conn.send_headers(stream_id, headers, end_stream=True)
        except Exception:
            pass  # the client reset the stream meanwhile
        self.flush()

    def connection_lost(self, exc):
        self.transport = None


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def split_jwt(token):
    """(header, claims, signing input, signature) of a compact JWS; raises ValueError when malformed."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not three dot-separated parts")
    header = json.loads(b64url_decode(parts[0]))
    claims = json.loads(b64url_decode(parts[1]))
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("header or claims not a JSON object")
    return header, claims, (parts[0] + "." + parts[1]).encode(), b64url_decode(parts[2])


def common_arguments(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--cert", required=True, help="PEM certificate chain of the server")
    parser.add_argument("--key", required=True, help="PEM private key of the server")
    parser.add_argument("--record", help="append every request, as a JSON line, to this file")
    parser.add_argument("--rules", help="JSON file of per-target answers (see Rules)")
    parser.add_argument("--max-concurrent-streams", type=int, default=1000)
    parser.add_argument("--exit-on-stdin-eof", action="store_true", help="stop when stdin closes (tests)")
    return parser


def listening_socket(host, port):
    """A TCP socket bound to host:port with SO_REUSEPORT, so that other processes can bind the same port."""
    family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, protocol)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind(address)
    return listener


def die_with_parent(parent):
    """Asks the kernel to kill this (forked) process when its parent ends, however the parent ends."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(0)


def serve(args, handler, processes=1):
    """Listens with TLS (ALPN h2), prints "LISTENING <port>" once every process listens, and serves until killed.
    With processes > 1 the process forks processes - 1 others, each serving on its own socket of the same port."""
    global _connection_ids
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2"])
    listener = listening_socket(args.host, args.port)
    port = listener.getsockname()[1]
    ready_read, ready_write = os.pipe()
    parent = os.getpid()
    for index in range(1, processes):
        if os.fork() == 0:
            die_with_parent(parent)
            os.close(ready_read)
            listener.close()
            listener = listening_socket(args.host, port)
            _connection_ids = itertools.count(index * 1_000_000 + 1)
            break
    else:
        index = 0
        os.close(ready_write)  # the parent only reads: end of file once every other process wrote and closed

    async def main():
        loop = asyncio.get_running_loop()
        listener.listen(1024)
        server = await loop.create_server(
            lambda: H2Protocol(handler, args.max_concurrent_streams), sock=listener, ssl=context
        )
        if index > 0:
            os.write(ready_write, b".")
            os.close(ready_write)
        else:
            with os.fdopen(ready_read, "rb") as ready:
                ready.read()  # returns once every other process listens (or has died)
            print(f"LISTENING {port}", flush=True)
        if args.exit_on_stdin_eof and index == 0:
            def watch():
                sys.stdin.read()
                os._exit(0)

            threading.Thread(target=watch, daemon=True).start()
        async with server:
            await server.serve_forever()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
