"""Gateway benchmark: a whole cluster (services/run-cluster.sh with release binaries) and h2load against the
gateway's public API. Prints h2load's summary for:

  1. grpc.health.v1.Health/Check on the gateway (the runtime alone, no downstream call);
  2. kindred.api.v1.AccountService/GetAccount with a signed-in user's token (gateway rate limits and Ed25519
     token verification, then a call to auth, which verifies the token again and reads the account from
     PostgreSQL).

Run through services/gateway/bench-gateway.sh (builds release first). Rate limits are lifted and access logs
switched off, so the figures measure the work rather than the limits.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests" / "Cluster"))

import cluster_harness  # noqa: E402  (generates the public API stubs)
import grpc  # noqa: E402
from kindred.api.v1 import account_pb2, account_pb2_grpc  # noqa: E402

REQUESTS = os.environ.get("BENCH_REQUESTS", "50000")
SHAPES = os.environ.get("BENCH_SHAPES", "-c10 -m10;-c1 -m1").split(";")


def h2load(gateway: str, path: str, headers: list, shape: str) -> str:
    body = ROOT / ".cluster-bench-empty.bin"
    body.write_bytes(b"\x00\x00\x00\x00\x00")  # one empty gRPC message
    command = ["h2load", "-n", REQUESTS, *shape.split(), "-d", str(body),
               "-H", "content-type: application/grpc", "-H", "te: trailers"]
    for header in headers:
        command += ["-H", header]
    command.append(f"http://{gateway}{path}")
    output = subprocess.run(command, capture_output=True, text=True, timeout=600).stdout
    body.unlink()
    keep = [line for line in output.splitlines()
            if re.match(r"^(finished in|requests:|status codes:|time for request:)", line.strip())]
    return "\n".join(keep)


def main():
    cluster = cluster_harness.Cluster(KINDRED_GATEWAY_ACCESS_LOG="false", KINDRED_AUTH_ACCESS_LOG="false",
                                      KINDRED_LOG_LEVEL="warning")
    try:
        channel = grpc.insecure_channel(cluster.gateway)
        accounts = account_pb2_grpc.AccountServiceStub(channel)
        email, password = "bench@example.com", "correct horse battery"
        accounts.SignUp(account_pb2.SignUpRequest(community_id="bench", email=email, username="bench",
                                                  password=password), timeout=10)
        code = cluster.verification_code(email)
        accounts.VerifyEmail(account_pb2.VerifyEmailRequest(code=account_pb2.VerificationCode(
            community_id="bench", email=email, code=code)), timeout=10)
        tokens = accounts.SignIn(account_pb2.SignInRequest(community_id="bench", login=email, password=password),
                                 timeout=10).tokens
        for shape in SHAPES:
            print(f"== Health/Check on the gateway, h2load -n {REQUESTS} {shape}")
            print(h2load(cluster.gateway, "/grpc.health.v1.Health/Check", [], shape))
            print(f"== AccountService/GetAccount through the gateway to auth, h2load -n {REQUESTS} {shape}")
            print(h2load(cluster.gateway, "/kindred.api.v1.AccountService/GetAccount",
                         [f"authorization: Bearer {tokens.access_token}"], shape))
        # h2load counts any grpc-status as success: the gateway's own counters tell whether the calls were OK.
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{cluster.admin_port('gateway')}/metrics",
                                         timeout=10).read().decode()
        print("== GetAccount answers by gRPC code (gateway metrics):")
        for line in metrics.splitlines():
            if line.startswith("grpc_server_handled_total") and "GetAccount" in line:
                print("  " + line)
        channel.close()
    finally:
        cluster.stop(force_cleanup=True)
        shutil.rmtree(cluster.folder, ignore_errors=True)


if __name__ == "__main__":
    main()
