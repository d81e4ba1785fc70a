#!/usr/bin/env bash
# The swipe benchmark (issue 11): acknowledged swipes per second through the gateway, with latency
# percentiles. Starts a cluster with services/run-cluster.sh (private PostgreSQL, synchronous_commit=on, auth,
# discovery (which match asks before every swipe), match, gateway) on a free port range in a temporary folder, runs the Swift load driver `kindred-load` (many
# members of one community swiping through DeckService/Swipe: likes and passes, some likes given back so
# matches happen), then stops the cluster. With KINDRED_BENCH_PERF=1 it also records `perf record -g` of the
# match and gateway servers during the run and prints their top symbols.
#
# Usage: Tests/Benchmarks/match-swipes.sh [kindred-load options, e.g. --users 4000 --concurrency 256 --seconds 20]
# Settings: KINDRED_BIN_DIR (ready release binaries: no build), KINDRED_BENCH_PERF=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh

if [ -z "${KINDRED_BIN_DIR:-}" ]; then
    for product in auth-server gateway-server discovery-server match-server kindred kindred-load; do
        swift build -c release --product "$product"
    done
    KINDRED_BIN_DIR="$(swift build -c release --show-bin-path)"
fi
export KINDRED_BIN_DIR

WORK="$(mktemp -d /tmp/kindred-bench.XXXXXX)"
chmod 755 "$WORK"
free() { ! (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
BASE=47050
while ! { free "$BASE" && free $((BASE + 1)) && free $((BASE + 3)) && free $((BASE + 4)) && free $((BASE + 100)) \
    && free $((BASE + 101)) && free $((BASE + 103)) && free $((BASE + 104)) && free $((BASE + 150)); }; do
    BASE=$((BASE + 10))
done

# The gateway's and match's per-client/per-account limits protect against abuse, not against a benchmark whose
# members all come from 127.0.0.1; access logs off (they measure the disk, not the service).
export KINDRED_CLUSTER_DIR="$WORK/run" KINDRED_DATA_DIR="$WORK/data" KINDRED_PORT_BASE="$BASE" \
    KINDRED_SMTP_PORT=$((BASE + 150)) KINDRED_LOG_LEVEL=warning \
    KINDRED_GATEWAY_CLIENT_RATE=1000000 KINDRED_GATEWAY_CLIENT_BURST=1000000 \
    KINDRED_GATEWAY_ACCOUNT_RATE=1000000 KINDRED_GATEWAY_ACCOUNT_BURST=1000000 \
    KINDRED_MATCH_SWIPE_RATE=1000000 KINDRED_MATCH_SWIPE_BURST=1000000 \
    KINDRED_GATEWAY_ACCESS_LOG=false KINDRED_MATCH_ACCESS_LOG=false KINDRED_AUTH_ACCESS_LOG=false \
    KINDRED_MATCH_DATABASE_POOL_SIZE="${KINDRED_MATCH_DATABASE_POOL_SIZE:-8}"

services/run-cluster.sh >"$WORK/cluster.log" 2>&1 &
CLUSTER=$!
stop() {
    kill -TERM "$CLUSTER" 2>/dev/null || true
    wait "$CLUSTER" 2>/dev/null || true
}
trap stop EXIT
wait_for_cluster "$WORK/cluster.log" "$CLUSTER"

pid_of() { awk -v name="$1" '$1 == name { print $2 }' "$WORK/run/pids"; }
if [ "${KINDRED_BENCH_PERF:-}" = 1 ]; then
    (sleep 6 && perf record -g -o "$WORK/perf.data" -p "$(pid_of match),$(pid_of gateway)" -- sleep 10 \
        >/dev/null 2>&1) &
    PERF=$!
fi
"$KINDRED_BIN_DIR/kindred-load" --gateway "127.0.0.1:$BASE" --match "127.0.0.1:$((BASE + 4))" \
    --discovery "127.0.0.1:$((BASE + 3))" \
    --key-file "$WORK/data/auth/signing-key.pem" "$@"
if [ -n "${PERF:-}" ]; then
    wait "$PERF" || true
    perf report -i "$WORK/perf.data" --no-children --sort comm,dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25
    perf report -i "$WORK/perf.data" --no-children --sort sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
fi
# What every swipe waited for discovery's CheckCandidates (mean over the run, warm-up and setup included).
curl -s "http://127.0.0.1:$((BASE + 104))/metrics" | awk '
    /^match_swipe_check_seconds_sum/ { sum = $2 } /^match_swipe_check_seconds_count/ { count = $2 }
    END { if (count > 0) printf "candidate check (discovery round trip): %d calls, mean %.3f ms\n", count, 1000 * sum / count }'
PGHOST="$(ls -d "$WORK"/run/postgres 2>/dev/null || true)"
echo "swipes stored: $(runuser -u postgres -- psql -X -A -t -h "$PGHOST" -d kindred -c 'SELECT count(*) FROM match.swipes' 2>/dev/null || echo '?')"
