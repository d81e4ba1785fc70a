"""Driver of Tests/Benchmarks/http2-abuse.sh: runs each attack of issue 16 against a running interop server
while an h2load victim calls Echo, and prints per attack the victim's p50/p99 and req/s before and during,
the server's peak RSS, and how fast the attacker was cut off.

Usage: http2_abuse.py PORT SERVER_PID ECHO_BODY [SECONDS]. The attackers connect from 127.0.0.2 so that the
address penalty never touches the victim (127.0.0.1)."""

import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Interop"))
from abuse_client import (COLLECT, DATA, ECHO, EXPAND, PING, RST_STREAM, SETTINGS, WINDOW_UPDATE,  # noqa: E402
                          Attacker, echo_request, frame, grpc_message, resident_bytes)

PORT, PID, BODY = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 5
SOURCE = "127.0.0.2"  # each attack gets its own (127.0.0.2, .3, ...), so one's penalty does not cover the next


def victim(seconds):
    """h2load -c1 -m1 on Echo for `seconds`: (p50 µs, p99 µs, req/s)."""
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        subprocess.run(["h2load", "-D", str(int(seconds)), "-c", "1", "-m", "1", "-d", BODY, "--log-file", log.name,
                        "-H", "content-type: application/grpc", "-H", "te: trailers",
                        f"http://127.0.0.1:{PORT}{ECHO}"], capture_output=True, check=True)
        times = sorted(int(line.split("\t")[2]) for line in log if line.strip())
    if not times:
        return 0, 0, 0
    return times[len(times) // 2], times[min(len(times) - 1, len(times) * 99 // 100)], len(times) / seconds


class Cut:
    """Collects, per attacking connection, the time from its first abusive frame to the server's close."""

    def __init__(self):
        self.times = []
        self.connections = 0
        self.refused = 0
        self.held = 0
        self.frames = 0

    def summary(self):
        if not self.times:
            return "not cut during the phase"
        text = f"cut after {statistics.median(self.times) * 1000:.1f} ms"
        if len(self.times) > 1:
            text += f" (median of {len(self.times)}, max {max(self.times) * 1000:.1f} ms)"
        return text


def empty_data(stop, cut):
    attacker = Attacker(PORT, source=SOURCE)
    cut.connections += 1
    stream = attacker.open_stream(COLLECT, end=False)
    run_flood(attacker, frame(DATA, 0, stream) * 1000, stop, cut)


def run_flood(attacker, chunk, stop, cut):
    """Floods until the server closes or the phase ends; `chunk` is bytes, or a function returning the next
    bytes (frames that must differ, such as new stream ids)."""
    start = time.monotonic()
    while not stop.is_set():
        _, sent, ended = attacker.flood(chunk() if callable(chunk) else chunk, 0.1 if not callable(chunk) else 0)
        cut.frames += sent
        if not ended:
            _, ended = attacker.read_frames(lambda f: False, timeout=0.001)
        if ended:
            cut.times.append(time.monotonic() - start)
            break
    attacker.close()


def window_update(stop, cut):
    attacker = Attacker(PORT, source=SOURCE)
    cut.connections += 1
    run_flood(attacker, frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1)) * 1000, stop, cut)


def ping_with_data(stop, cut):
    attacker = Attacker(PORT, source=SOURCE)
    cut.connections += 1
    stream = attacker.open_stream(COLLECT, end=False)
    chunk = b"".join(frame(PING, 0, 0, struct.pack(">Q", i)) + frame(DATA, 0, stream, b"\x00") for i in range(100))
    run_flood(attacker, chunk, stop, cut)


def settings_non_reading(stop, cut):
    attacker = Attacker(PORT, source=SOURCE, receive_buffer=4096)
    cut.connections += 1
    run_flood(attacker, frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 65535)) * 100, stop, cut)


def ping_non_reading(stop, cut):
    attacker = Attacker(PORT, source=SOURCE, receive_buffer=4096)
    cut.connections += 1
    # A stream keeps the connection "busy", so the gRPC PING policy alone would allow one PING per 5 minutes.
    attacker.open_stream(COLLECT, end=False)
    run_flood(attacker, b"".join(frame(PING, 0, 0, struct.pack(">Q", i)) for i in range(100)), stop, cut)


def hpack_bomb(stop, cut):
    attacker = Attacker(PORT, source=SOURCE)
    cut.connections += 1
    big = [("x-big", "a" * 4000)] * 1000
    start = time.monotonic()
    try:
        while not stop.is_set():
            attacker.open_stream(ECHO, grpc_message(b""), extra=big)
            cut.frames += 1
            _, ended = attacker.read_frames(lambda f: False, timeout=0.001)
            if ended:
                raise ConnectionResetError
    except (BrokenPipeError, ConnectionResetError, OSError):
        cut.times.append(time.monotonic() - start)
    attacker.close()


def rapid_reset_chunk(attacker, streams=200):
    chunk = b""
    for _ in range(streams):
        stream = attacker.next_stream
        attacker.next_stream += 2
        chunk += frame(1, 0x4, stream, attacker.headers_block(ECHO)) + frame(RST_STREAM, 0, stream, struct.pack(">I", 8))
    return chunk


def rapid_reset_reconnecting(stop, cut):
    # Reconnects as soon as its connection ends: refused ones end at once, held ones (the tarpit) when the
    # server lets them go.
    while not stop.is_set():
        try:
            attacker = Attacker(PORT, source=SOURCE)
        except OSError:
            cut.refused += 1
            continue
        cut.connections += 1
        start = time.monotonic()
        settings = None
        while not stop.is_set():
            settings, ended = attacker.read_frames(lambda f: f[0] == SETTINGS, timeout=0.2)
            if settings is not None or ended:
                break
        if settings is None:
            if time.monotonic() - start < 0.1:
                cut.refused += 1
            else:
                cut.held += 1
            attacker.close()
            continue
        run_flood(attacker, lambda: rapid_reset_chunk(attacker), stop, cut)


def rapid_reset_reconnecting_4(stop, cut):
    threads = [threading.Thread(target=rapid_reset_reconnecting, args=(stop, cut)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def non_reading(stop, cut):
    attacker = Attacker(PORT, source=SOURCE, settings=[(4, 2**31 - 1)], receive_buffer=4096)
    cut.connections += 1
    attacker.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 2**31 - 1 - 65535)))
    for _ in range(2):
        attacker.open_stream(EXPAND, grpc_message(echo_request(response_count=10_000, response_size=4 << 20)))
    stop.wait()
    attacker.close()


def zero_window(stop, cut):
    attackers = []
    for _ in range(4):
        attacker = Attacker(PORT, source=SOURCE, settings=[(4, 0)], receive_buffer=4096)
        cut.connections += 1
        for _ in range(100):
            attacker.open_stream(EXPAND, grpc_message(echo_request(response_count=10_000, response_size=4 << 20)))
        attackers.append(attacker)
    stop.wait()
    for attacker in attackers:
        attacker.close()


def slowloris(stop, cut):
    attackers = []
    for index in range(500):
        attacker = Attacker(PORT, source=SOURCE, preface=False)
        if index % 2:
            attacker.send(b"PRI * HTTP/2.0\r\n")
        attackers.append(attacker)
    cut.connections += len(attackers)
    start = time.monotonic()
    pending = list(attackers)
    # Not bounded by the phase: waits (up to 15 s) for the handshake timeout to close them all.
    while pending and time.monotonic() - start < 15:
        for attacker in list(pending):
            _, ended = attacker.read_frames(lambda f: False, timeout=0.001)
            if ended:
                cut.times.append(time.monotonic() - start)
                pending.remove(attacker)
        time.sleep(0.05)
    for attacker in attackers:
        attacker.close()


ATTACKS = [
    ("non-reading, windows 2^31-1, 2 streams", non_reading),
    ("SETTINGS flood, not reading", settings_non_reading),
    ("PING flood, not reading", ping_non_reading),
    ("empty DATA flood", empty_data),
    ("WINDOW_UPDATE +1 flood", window_update),
    ("PING + 1 byte DATA", ping_with_data),
    ("HPACK bomb (4 MB/block)", hpack_bomb),
    ("Rapid Reset, reconnecting, 1 loop", rapid_reset_reconnecting),
    ("Rapid Reset, reconnecting, 4 loops", rapid_reset_reconnecting_4),
    ("500 silent/partial-preface conns", slowloris),
    # Last: what it allocates stays in the process (malloc keeps it), which would skew the other rows.
    ("zero windows, 4 conns x 100 streams", zero_window),
]


def measure(name, attack, seconds, source):
    global SOURCE
    SOURCE = source
    before = victim(seconds)
    baseline_rss = resident_bytes(PID)
    stop = threading.Event()
    cut = Cut()
    peak = [baseline_rss]

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], resident_bytes(PID))
            time.sleep(0.01)
    sampler = threading.Thread(target=sample)
    attacker = threading.Thread(target=attack, args=(stop, cut))
    sampler.start()
    attacker.start()
    time.sleep(0.2)
    during = victim(seconds)
    stop.set()
    attacker.join()
    sampler.join()
    extra = f", {cut.connections} conns" + (f", {cut.refused} refused" if cut.refused else "") + (
        f", {cut.held} held" if cut.held else "")
    print(f"{name:40s} victim p50 {before[0]:5d} -> {during[0]:5d} us  p99 {before[1]:5d} -> {during[1]:6d} us "
          f"(x{during[1] / max(1, before[1]):.1f})  req/s {before[2]:7.0f} -> {during[2]:7.0f}  "
          f"peak RSS {peak[0] / 2**20:6.0f} MB  {cut.summary()}{extra}", flush=True)
    time.sleep(1)


if __name__ == "__main__":
    only = os.environ.get("ATTACKS")
    for index, (name, attack) in enumerate(ATTACKS):
        if only and attack.__name__ not in only.split(","):
            continue
        measure(name, attack, SECONDS, f"127.0.0.{index + 2}")
