#!/usr/bin/env python3
"""The same unary call through the gateway over gRPC, gRPC-Web and Connect JSON (HTTP/2, h2load):
req/s and the gateway's CPU time per call (user + sys from /proc/PID/stat), which moves far less than req/s when
other processes share the cores. The call is AccountService.GetAccount with a member's token (the gateway checks
the token and the revoked-sessions set, then calls auth). Rounds alternate the protocols.

Usage: python3 Tests/Benchmarks/web-protocols.py [calls per round (default 20000)] [rounds (default 3)];
KINDRED_BIN_PATH=<folder> runs other binaries (e.g. `swift build -c release --show-bin-path`)."""

import os
import pathlib
import re
import subprocess
import sys
import tempfile
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "Cluster"))
from cluster_harness import Cluster  # noqa: E402

import grpc  # noqa: E402
from kindred.api.v1 import account_pb2, account_pb2_grpc  # noqa: E402

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
PATH = "/kindred.api.v1.AccountService/GetAccount"
FORMS = {
    "gRPC": (b"\0\0\0\0\0", ["content-type: application/grpc", "te: trailers"]),
    "gRPC-Web": (b"\0\0\0\0\0", ["content-type: application/grpc-web+proto"]),
    # (Connect proto's body would be the empty GetAccountRequest, which h2load cannot send with -d.)
    "Connect JSON": (b"{}", ["content-type: application/json", "connect-protocol-version: 1"]),
}


def sign_up(cluster) -> str:
    community, email = f"bench-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:10]}@example.com"
    password = "correct horse battery staple"
    with grpc.insecure_channel(cluster.gateway) as channel:
        accounts = account_pb2_grpc.AccountServiceStub(channel)
        accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=email, username=f"b_{uuid.uuid4().hex[:8]}",
                                                  password=password), timeout=30)
        code = cluster.verification_code(email)
        accounts.VerifyEmail(account_pb2.VerifyEmailRequest(
            code=account_pb2.VerificationCode(community_id=community, email=email, code=code)), timeout=30)
        return accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=password),
                               timeout=30).tokens.access_token


def ticks(pid: int) -> int:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def run(cluster, token, body_file, headers, calls) -> tuple:
    command = ["h2load", "-n", str(calls), "-c", "10", "-m", "10", "-d", body_file,
               "-H", f"authorization: Bearer {token}"]
    for header in headers:
        command += ["-H", header]
    result = subprocess.run(command + [f"http://{cluster.gateway}{PATH}"], capture_output=True, text=True)
    output = result.stdout + result.stderr
    found = re.search(r"finished in .*?, ([\d.]+) req/s", output)
    assert found, output
    rate = float(found.group(1))
    status = re.search(r"status codes: (\d+) 2xx", output)
    return rate, int(status.group(1)) if status else 0


def main():
    cluster = Cluster(KINDRED_GATEWAY_ACCESS_LOG="false")
    try:
        gateway = cluster.pids()["gateway"]
        token = sign_up(cluster)
        folder = pathlib.Path(tempfile.mkdtemp(prefix="kindred-web-bench-"))
        files = {}
        for name, (body, _) in FORMS.items():
            files[name] = str(folder / f"{len(files)}.bin")
            pathlib.Path(files[name]).write_bytes(body)
        for name, (_, headers) in FORMS.items():
            run(cluster, token, files[name], headers, 2000)  # warm-up
        results = {name: [] for name in FORMS}
        for _ in range(ROUNDS):
            for name, (_, headers) in FORMS.items():
                before = ticks(gateway)
                rate, ok = run(cluster, token, files[name], headers, CALLS)
                cpu = (ticks(gateway) - before) / os.sysconf("SC_CLK_TCK") / CALLS * 1e6
                assert ok == CALLS, f"{name}: {ok} of {CALLS} answered 2xx"
                results[name].append((rate, cpu))
        print(f"GetAccount through the gateway, h2load -c10 -m10, {CALLS} calls x {ROUNDS} rounds")
        grpc_cpu = sorted(c for _, c in results["gRPC"])[ROUNDS // 2]
        for name, rounds in results.items():
            rates = sorted(r for r, _ in rounds)
            cpus = sorted(c for _, c in rounds)
            median = cpus[ROUNDS // 2]
            print(f"{name:14} {rates[0]:8.0f}-{rates[-1]:<8.0f} req/s   gateway CPU {median:6.1f} µs/call "
                  f"({cpus[0]:.1f}-{cpus[-1]:.1f}; {median / grpc_cpu:.2f}x gRPC)")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
