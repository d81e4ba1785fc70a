#!/usr/bin/env bash
# Starts the local Kindred cluster: builds the servers (release) and runs every server that exists,
# each answering gRPC health checks, until Ctrl-C. Today that is the interop test server (the runtime
# foundation); auth, profile, discovery, match, chat and the gateway join as they are built.
set -euo pipefail
cd "$(dirname "$0")/.."

services/install-deps.sh
echo "Building the servers (release)..."
swift build -c release --product kindred-interop-server
BIN="$(swift build -c release --show-bin-path)"

RUN=.cluster
mkdir -p "$RUN/logs"
if [ -f "$RUN/pids" ] && xargs -r kill -0 <"$RUN/pids" 2>/dev/null; then
    echo "A Kindred cluster is already running from this checkout (pids: $(tr '\n' ' ' <"$RUN/pids"))." >&2
    exit 1
fi
: >"$RUN/pids"

stop() {
    trap - INT TERM EXIT
    [ -f "$RUN/pids" ] || exit 0
    echo "Stopping (SIGTERM: servers drain and exit)..."
    xargs -r kill -TERM <"$RUN/pids" 2>/dev/null || true
    wait || true
    rm -f "$RUN/pids"
    exit 0
}
trap stop INT TERM EXIT

"$BIN/kindred-interop-server" --host 127.0.0.1 --port 50099 --log-level info \
    >"$RUN/logs/interop.out" 2>"$RUN/logs/interop.log" &
echo $! >>"$RUN/pids"

for _ in $(seq 100); do grep -q LISTENING "$RUN/logs/interop.out" 2>/dev/null && break; sleep 0.1; done
grep -q LISTENING "$RUN/logs/interop.out" || { echo "interop server failed to start; see $RUN/logs/interop.log" >&2; exit 1; }
python3 - <<'PY'
import grpc, sys
sys.path.insert(0, "")
from grpc_health.v1 import health_pb2, health_pb2_grpc
with grpc.insecure_channel("127.0.0.1:50099") as channel:
    status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status
    print("interop server health:", health_pb2.HealthCheckResponse.ServingStatus.Name(status))
PY
echo "Kindred is up: interop test server at 127.0.0.1:50099 (h2c). Logs in $RUN/logs. Ctrl-C stops it."
wait
