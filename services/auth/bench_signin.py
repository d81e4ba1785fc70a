#!/usr/bin/env python3
"""Sign-in latency against a running auth-server: N sign-ins at concurrency C with Python grpcio, p50/p99.

Usage: bench_signin.py HOST:PORT LOGIN PASSWORD [REQUESTS] [CONCURRENCY...]
The account must exist and be verified. Each call is a full SignIn (Argon2id verify + session insert)."""

import statistics
import sys
import threading
import time

import grpc


def field(number, text):
    data = text.encode()
    return bytes([number << 3 | 2, len(data)]) + data  # strings here are < 128 bytes


def main():
    target, login, password = sys.argv[1:4]
    requests = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    levels = [int(x) for x in sys.argv[5:]] or [1, 8]
    request = field(1, "bench") + field(2, login) + field(3, password)
    channel = grpc.insecure_channel(target)
    call = channel.unary_unary("/kindred.auth.v1.AuthService/SignIn",
                               request_serializer=lambda b: b, response_deserializer=lambda b: b)
    call(request, timeout=10)  # warm-up
    for concurrency in levels:
        latencies = []
        lock = threading.Lock()
        remaining = [requests]

        def worker():
            while True:
                with lock:
                    if remaining[0] == 0:
                        return
                    remaining[0] -= 1
                start = time.perf_counter()
                call(request, timeout=30, metadata=[("x-kindred-client-ip", f"198.51.100.{threading.get_ident() % 250}")])
                elapsed = time.perf_counter() - start
                with lock:
                    latencies.append(elapsed)

        began = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
        print(f"concurrency {concurrency}: {len(latencies)} sign-ins, p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
              f"{len(latencies) / wall:.1f} sign-ins/s")


if __name__ == "__main__":
    main()
