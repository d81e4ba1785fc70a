#!/usr/bin/env bash
# The interop server's CPU time (user + sys, from /proc/PID/stat) per Echo call at h2load -c10 -m10: a measure of
# per-call cost that moves far less than req/s when other processes share the cores.
# Usage: Tests/Benchmarks/grpc-cpu-per-call.sh [calls (default 200000)]; KINDRED_INTEROP_SERVER=<binary> runs
# another build (e.g. one of an older commit, to compare; alternate the two).
set -euo pipefail
cd "$(dirname "$0")/../.."
CALLS=${1:-200000}
# shellcheck source=Tests/Benchmarks/interop-server.sh
source Tests/Benchmarks/interop-server.sh
call() {
    h2load -n "$1" -c 10 -m 10 -d "$WORK/echo.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://$ADDRESS/kindred.testing.v1.InteropService/Echo" 2>&1
}
call 20000 >/dev/null # warm-up
ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
before=$(ticks)
out=$(call "$CALLS")
after=$(ticks)
python3 -c "import sys; print(f'server CPU per call {(int(sys.argv[2]) - int(sys.argv[1])) / int(sys.argv[3]) / int(sys.argv[4]) * 1e6:.2f} µs')" \
    "$before" "$after" "$(getconf CLK_TCK)" "$CALLS"
echo "$out" | awk '/^finished in/ {print "throughput " $4 " req/s"} /^requests:/ {print "failed " $10}'
