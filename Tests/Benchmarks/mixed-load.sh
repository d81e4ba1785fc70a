#!/usr/bin/env bash
# One load figure for the whole system (issue 14): `kindred-load mixed` through the gateway of a release cluster
# (services/run-cluster.sh: every server, private PostgreSQL with synchronous_commit=on) on a free port range in
# a temporary folder. Setup makes a community, members with profiles and locations, matched pairs with open
# threads and live Subscribe streams, all through the public API; then deck fetches, swipes (some become
# matches), chat sends (delivered live) and profile reads run in one mix. It prints sustained requests/s,
# p50/p99 per call type, the CPU each server and PostgreSQL used during the run, and the load average.
# With KINDRED_BENCH_PERF=1 it also records `perf record -g` of every server and PostgreSQL process for 10 s of
# the measured window and prints the top processes, libraries and symbols.
#
# Usage: Tests/Benchmarks/mixed-load.sh [kindred-load mixed options, e.g. --users 1000 --concurrency 64 --seconds 20]
# Settings: KINDRED_BIN_DIR (ready release binaries: no build), KINDRED_BENCH_PERF=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh

if [ -z "${KINDRED_BIN_DIR:-}" ]; then
    for product in auth-server profile-server discovery-server match-server chat-server gateway-server kindred \
        kindred-load; do
        swift build -c release --product "$product"
    done
    KINDRED_BIN_DIR="$(swift build -c release --show-bin-path)"
fi
export KINDRED_BIN_DIR

WORK="$(mktemp -d /tmp/kindred-mixed.XXXXXX)"
chmod 755 "$WORK"
free() { ! (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
BASE=48050
ports_free() { # gRPC, admin, SMTP and media ports of base $1
    local i
    for i in 0 1 2 3 4 5 100 101 102 103 104 105 150 200; do free $(($1 + i)) || return 1; done
}
while ! ports_free "$BASE"; do BASE=$((BASE + 10)); done

# Per-client/per-account limits protect against abuse, not against a benchmark whose members all come from
# 127.0.0.1; access logs off (they measure the disk, not the services).
export KINDRED_CLUSTER_DIR="$WORK/run" KINDRED_DATA_DIR="$WORK/data" KINDRED_PORT_BASE="$BASE" \
    KINDRED_SMTP_PORT=$((BASE + 150)) KINDRED_LOG_LEVEL=warning \
    KINDRED_GATEWAY_CLIENT_RATE=1000000 KINDRED_GATEWAY_CLIENT_BURST=1000000 \
    KINDRED_GATEWAY_ACCOUNT_RATE=1000000 KINDRED_GATEWAY_ACCOUNT_BURST=1000000 \
    KINDRED_MATCH_SWIPE_RATE=1000000 KINDRED_MATCH_SWIPE_BURST=1000000 \
    KINDRED_DISCOVERY_VIEWER_RATE=1000000 KINDRED_DISCOVERY_VIEWER_BURST=1000000 \
    KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT=10000 \
    KINDRED_GATEWAY_ACCESS_LOG=false KINDRED_AUTH_ACCESS_LOG=false KINDRED_PROFILE_ACCESS_LOG=false \
    KINDRED_DISCOVERY_ACCESS_LOG=false KINDRED_MATCH_ACCESS_LOG=false KINDRED_CHAT_ACCESS_LOG=false

setsid services/run-cluster.sh >"$WORK/cluster.log" 2>&1 </dev/null &
CLUSTER=$!
stop() { # TERM: a background job ignores INT (bash), so run-cluster.sh would never see it
    kill -TERM "$CLUSTER" 2>/dev/null || true
    wait "$CLUSTER" 2>/dev/null || true
    grep -q "Kindred stopped." "$WORK/cluster.log" || tail -n 20 "$WORK/cluster.log"
    rm -rf "$WORK"
}
trap stop EXIT
wait_for_cluster "$WORK/cluster.log" "$CLUSTER"

echo "binaries $KINDRED_BIN_DIR, $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
OUT="$WORK/kindred-load.out"
: >"$OUT"
if [ "${KINDRED_BENCH_PERF:-}" = 1 ]; then
    # 10 s of the measured window (after setup and the 3 s warm-up): every server and PostgreSQL process.
    (until grep -q '^mixed load:' "$OUT"; do sleep 0.2; done
        sleep 4
        postmaster="$(awk '$1 == "postgres" { print $2 }' "$WORK/run/pids")"
        pids="$(awk '$1 != "run-cluster" && $1 != "smtp-sink" { print $2 }' "$WORK/run/pids"; pgrep -P "$postmaster")"
        perf record -g -o "$WORK/perf.data" -p "$(paste -sd, - <<<"$pids")" -- sleep 10 >/dev/null 2>&1) &
    PERF=$!
fi
"$KINDRED_BIN_DIR/kindred-load" mixed --gateway "127.0.0.1:$BASE" --key-file "$WORK/data/auth/signing-key.pem" \
    --pids-file "$WORK/run/pids" "$@" | tee "$OUT"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Where PostgreSQL's time went: the tables read most by sequential scans, and the busiest by index.
PSQL="$(sed -n 's/^ *db: *\(\S*\) "\(.*\)"$/\1 \2/p' "$WORK/cluster.log")"
if [ -n "$PSQL" ]; then
    read -r psql url <<<"$PSQL"
    runuser -u postgres -- "$psql" -X -P pager=off -c "SELECT schemaname || '.' || relname AS table, seq_scan,
        seq_tup_read, idx_scan, n_tup_ins + n_tup_upd + n_tup_del AS writes FROM pg_stat_user_tables
        ORDER BY seq_tup_read DESC, idx_scan DESC LIMIT 10" "$url" 2>&1 || true
fi
if [ -n "${PERF:-}" ]; then
    wait "$PERF" || true
    perf report -i "$WORK/perf.data" --no-children --sort comm,dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -30
    perf report -i "$WORK/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
fi
