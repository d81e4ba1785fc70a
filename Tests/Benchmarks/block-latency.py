"""How long Block and Unblock take now that they return only once every consumer applied them: a cluster
(services/run-cluster.sh, debug or release binaries of KINDRED_BIN_PATH), two fitness members, N rounds of
Block then Unblock through the gateway; prints p50/p90/max per call.

    KINDRED_BIN_PATH="$(swift build --show-bin-path)" python3 Tests/Benchmarks/block-latency.py [ROUNDS]
"""
import pathlib
import statistics
import sys
import time

import grpc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "Cluster"))  # the cluster tests' harness
from cluster_harness import Cluster, assert_clean_stop
from test_consent import Api, Member, BOOTSTRAP_SECRET

from kindred.api.v1 import match_pb2  # noqa: E402


def main(rounds: int) -> None:
    cluster = Cluster(KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET)
    pids = cluster.pids()
    try:
        with grpc.insecure_channel(cluster.gateway) as channel:
            api = Api(channel)
            one, other = Member(cluster, api, "One", 48.85, 2.35), Member(cluster, api, "Other", 48.86, 2.36)
            times = {"Block": [], "Unblock": []}
            for _ in range(rounds):
                for name, call, request in (("Block", api.matches.Block, match_pb2.BlockRequest),
                                            ("Unblock", api.matches.Unblock, match_pb2.UnblockRequest)):
                    started = time.perf_counter()
                    call(request(target_user_id=other.id), metadata=one.auth, timeout=30)
                    times[name].append((time.perf_counter() - started) * 1000)
            for name, values in times.items():
                values.sort()
                print(f"{name}: n={len(values)} p50={statistics.median(values):.1f} ms "
                      f"p90={values[int(len(values) * 0.9) - 1]:.1f} ms max={values[-1]:.1f} ms")
    finally:
        assert_clean_stop(cluster, pids)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
