"""A raw HTTP/2 attacker for the abuse tests and the abuse benchmark: frames built by hand (hpack for header
blocks), so that floods run at full speed and nothing checks what a real client would refuse to send."""

import select
import socket
import struct
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
ENHANCE_YOUR_CALM = 0xB
ECHO = "/kindred.testing.v1.InteropService/Echo"
EXPAND = "/kindred.testing.v1.InteropService/Expand"
COLLECT = "/kindred.testing.v1.InteropService/Collect"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream) + payload


def grpc_message(message: bytes) -> bytes:
    return struct.pack(">BI", 0, len(message)) + message


def echo_request(message=b"", response_count=0, response_size=0, delay_ms=0) -> bytes:
    """An EchoRequest encoded by hand (field 1 message, 5 delay_ms, 6 response_count, 7 response_size)."""
    def varint(value):
        out = b""
        while True:
            byte = value & 0x7F
            value >>= 7
            if value:
                out += bytes([byte | 0x80])
            else:
                return out + bytes([byte])
    out = b""
    if message:
        out += b"\x0a" + varint(len(message)) + message
    if delay_ms:
        out += b"\x28" + varint(delay_ms)
    if response_count:
        out += b"\x30" + varint(response_count)
    if response_size:
        out += b"\x38" + varint(response_size)
    return out


class Attacker:
    """One connection. `settings` are (id, value) pairs of the client's SETTINGS frame."""

    def __init__(self, port, settings=(), receive_buffer=None, preface=True, timeout=5, source="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Another loopback source address (127.0.0.2) keeps a benchmark's victim out of the attacker's penalty.
        self.sock.bind((source, 0))
        if receive_buffer is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.encoder = hpack.Encoder()
        self.next_stream = 1
        self.buffer = b""
        if preface:
            payload = b"".join(struct.pack(">HI", key, value) for key, value in settings)
            self.send(PREFACE + frame(SETTINGS, 0, 0, payload))

    def send(self, data):
        self.sock.sendall(data)

    def headers_block(self, path, extra=()):
        return self.encoder.encode([(":method", "POST"), (":scheme", "http"), (":path", path),
                                    (":authority", "localhost"), ("content-type", "application/grpc"),
                                    ("te", "trailers"), *extra])

    def open_stream(self, path, body=None, end=True, extra=()):
        """HEADERS (and DATA when `body` is given); returns the stream id."""
        stream = self.next_stream
        self.next_stream += 2
        data = frame(HEADERS, END_HEADERS | (END_STREAM if end and body is None else 0), stream,
                     self.headers_block(path, extra))
        if body is not None:
            data += frame(DATA, END_STREAM if end else 0, stream, body)
        self.send(data)
        return stream

    def read_frames(self, until, timeout=5):
        """Reads frames (kind, flags, stream, payload) until `until(frame)` is true, EOF or `timeout`.
        Returns (the matching frame or None, whether the connection ended)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while len(self.buffer) >= 9:
                length = int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) < 9 + length:
                    break
                kind, flags, stream = struct.unpack(">BBI", self.buffer[3:9])
                item = (kind, flags, stream & 0x7FFFFFFF, self.buffer[9:9 + length])
                self.buffer = self.buffer[9 + length:]
                if until(item):
                    return item, False
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                break
            except (ConnectionResetError, BrokenPipeError):
                return None, True
            if not data:
                return None, True
            self.buffer += data
        return None, False

    def wait_goaway(self, timeout=5):
        """The GOAWAY error code the server sent (None if none) and whether the connection ended."""
        found, ended = self.read_frames(lambda f: f[0] == GOAWAY, timeout)
        code = struct.unpack(">II", found[3][:8])[1] if found else None
        if found and not ended:
            _, ended = self.read_frames(lambda f: False, timeout)
        return code, ended

    def flood(self, chunk, seconds):
        """Sends `chunk` over and over for up to `seconds` (never a partial frame: a blocked send resumes where
        it stopped). Returns (seconds taken, chunks sent, whether the server cut the connection)."""
        start = time.monotonic()
        sent = 0
        offset = 0
        view = memoryview(chunk)
        self.sock.setblocking(False)
        first = True
        try:
            # At least one whole chunk, and never stopping inside one (unless blocked 2 s past the end).
            while first or (offset and time.monotonic() - start < seconds + 2) or time.monotonic() - start < seconds:
                first = False
                try:
                    offset += self.sock.send(view[offset:])
                except BlockingIOError:
                    select.select([], [self.sock], [], 0.05)
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    return time.monotonic() - start, sent, True
                if offset == len(chunk):
                    offset = 0
                    sent += 1
            return time.monotonic() - start, sent, False
        finally:
            self.sock.settimeout(5)

    def close(self):
        self.sock.close()


def resident_bytes(pid) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
