#!/usr/bin/env bash
# Benchmarks the gRPC runtime with h2load (a real HTTP/2 peer): a release build of the interop server,
# its small unary method (Echo) and health Check, at -c1 -m1 and -c10 -m10. Prints req/s and latency.
# Usage: Tests/Benchmarks/grpc-h2load.sh [requests-for-c10m10 (default 300000)]
set -euo pipefail
cd "$(dirname "$0")/../.."
REQUESTS=${1:-300000}

# shellcheck source=Tests/Benchmarks/interop-server.sh
source Tests/Benchmarks/interop-server.sh

run() { # name path body clients streams requests
    local out
    out=$(h2load -n "$6" -c "$4" -m "$5" -d "$WORK/$3" -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://$ADDRESS$2" 2>&1)
    local rps mean failed
    rps=$(echo "$out" | awk '/^finished in/ {print $4}')
    mean=$(echo "$out" | awk '/^time for request:/ {print $6}')
    failed=$(echo "$out" | awk '/^requests:/ {print $10}')
    printf '%-14s -c%-3s -m%-3s %10s req/s   mean latency %8s   failed %s\n' "$1" "$4" "$5" "$rps" "$mean" "$failed"
}

# On an idle VM every -c1 -m1 round trip pays two vCPU wake-ups (server and h2load sleep in epoll between
# requests), which costs more than the request itself. The "awake" rows repeat -c1 -m1 with two idle-priority
# (nice 19) busy loops keeping the vCPUs from halting; they take no CPU from the measured processes.
awake() {
    local spinners=()
    for _ in 1 2; do nice -n 19 bash -c 'while :; do :; done' & spinners+=($!); done
    "$@"
    kill "${spinners[@]}" 2>/dev/null || true
    wait "${spinners[@]}" 2>/dev/null || true
}

echo "h2load against $BIN ($(nproc) cores)"
h2load -n 20000 -c 10 -m 10 -d "$WORK/echo.bin" -H 'content-type: application/grpc' \
    "http://$ADDRESS/kindred.testing.v1.InteropService/Echo" >/dev/null 2>&1 # warm-up
for i in 1 2 3; do
    run "Echo" /kindred.testing.v1.InteropService/Echo echo.bin 1 1 $((REQUESTS / 6))
    awake run "Echo (awake)" /kindred.testing.v1.InteropService/Echo echo.bin 1 1 $((REQUESTS / 6))
    run "Echo" /kindred.testing.v1.InteropService/Echo echo.bin 10 10 "$REQUESTS"
    run "Health/Check" /grpc.health.v1.Health/Check health.bin 1 1 $((REQUESTS / 6))
    awake run "Check (awake)" /grpc.health.v1.Health/Check health.bin 1 1 $((REQUESTS / 6))
    run "Health/Check" /grpc.health.v1.Health/Check health.bin 10 10 "$REQUESTS"
done
echo "server RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/$SERVER/status)"
