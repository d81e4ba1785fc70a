#!/usr/bin/env bash
# The swipe benchmark (issue 11): acknowledged swipes per second through the gateway, with latency
# percentiles. Starts a cluster with services/run-cluster.sh (private PostgreSQL, synchronous_commit=on, auth,
# discovery (which match asks before every swipe), match, gateway) on a free port range in a temporary folder, runs the Swift load driver `kindred-load` (many
# members of one community swiping through DeckService/Swipe: likes and passes, some likes given back so
# matches happen), then stops the cluster. With KINDRED_BENCH_PERF=1 it also records `perf record -g` of the
# match and gateway servers during the run and prints their top symbols.
#
# After the run, the same PostgreSQL's own ceiling for the same writes, with no application in front of it: pgbench
# inserting into copies of match's swipes and events_outbox tables (one outbox row per swipe, fsync and
# synchronous_commit on), in transactions of 16 rows at 16 clients and of 64 rows at 8 clients, 10 s each.
#
# Usage: Tests/Benchmarks/match-swipes.sh [kindred-load options, e.g. --users 4000 --concurrency 256 --seconds 20]
# Settings: KINDRED_BIN_DIR (ready release binaries: no build), KINDRED_BENCH_PERF=1, KINDRED_BENCH_PGBENCH=0
# (no pgbench comparison), KINDRED_BENCH_PGBENCH_SECONDS (default 10).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh

release_binaries auth-server gateway-server discovery-server match-server kindred kindred-load

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
PGHOST="$(ls -d "$WORK"/run/postgres 2>/dev/null || true)"
OUT="$WORK/kindred-load.out"
: >"$OUT"
# The servers planned their statements while their tables were empty, and PostgreSQL keeps a cached plan until the
# table's statistics change (autovacuum gathers them after a running cluster's first minute; a 20 s run has not had
# that). One ANALYZE, with a small sample so that it ends within the driver's 3 s warm-up, as the warm-up starts.
(until grep -q '^members ' "$OUT"; do sleep 0.1; done
    runuser -u postgres -- psql -X -q -h "$PGHOST" -d kindred -c "SET default_statistics_target = 10" -c "ANALYZE" \
        >/dev/null 2>&1) &
ANALYZE=$!
stdbuf -oL "$KINDRED_BIN_DIR/kindred-load" --gateway "127.0.0.1:$BASE" --match "127.0.0.1:$((BASE + 4))" \
    --discovery "127.0.0.1:$((BASE + 3))" \
    --key-file "$WORK/data/auth/signing-key.pem" "$@" | tee "$OUT"
wait "$ANALYZE" || true
if [ -n "${PERF:-}" ]; then
    wait "$PERF" || true
    perf report -i "$WORK/perf.data" --no-children --sort comm,dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25
    perf report -i "$WORK/perf.data" --no-children --sort sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
fi
# What every swipe waited for discovery's CheckCandidates (mean over the run, warm-up and setup included).
curl -s "http://127.0.0.1:$((BASE + 104))/metrics" | awk '
    /^match_swipe_check_seconds_sum/ { sum = $2 } /^match_swipe_check_seconds_count/ { count = $2 }
    END { if (count > 0) printf "candidate check (discovery round trip): %d calls, mean %.3f ms\n", count, 1000 * sum / count }'
echo "swipes stored: $(runuser -u postgres -- psql -X -A -t -h "$PGHOST" -d kindred -c 'SELECT count(*) FROM match.swipes' 2>/dev/null || echo '?')"

# The database's own ceiling for the same rows (FINDINGS.md: ~21,000/s in transactions of 16, ~35,000/s of 64).
if [ "${KINDRED_BENCH_PGBENCH:-1}" != 0 ]; then
    pg() { runuser -u postgres -- "$@"; }
    pg psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -d kindred -c "
        CREATE SCHEMA bench;
        CREATE TABLE bench.swipes (LIKE match.swipes INCLUDING ALL);
        CREATE TABLE bench.events_outbox (LIKE match.events_outbox INCLUDING ALL);"
    for rows in 16 64; do
        clients=$((rows == 16 ? 16 : 8))
        cat >"$WORK/pgbench-$rows.sql" <<SQL
BEGIN;
INSERT INTO bench.swipes (swiper, target, community_id, swipe_id, action, swiped_at, outcome)
SELECT gen_random_uuid(), gen_random_uuid(), 'bench', gen_random_uuid(), 1 + g % 2, now(), 1
FROM generate_series(1, $rows) AS g;
INSERT INTO bench.events_outbox (event_id, user_id, community_id, partition_key, sequence, event_type, payload)
SELECT gen_random_uuid(), u::text, 'bench', u::text, 1, 'kindred.match.v1.SwipeRecorded', '\x0a2400'::bytea
FROM (SELECT gen_random_uuid() AS u FROM generate_series(1, $rows)) AS x;
COMMIT;
SQL
        chmod 644 "$WORK/pgbench-$rows.sql"
        tps="$(pg pgbench -n -h "$PGHOST" -d kindred -f "$WORK/pgbench-$rows.sql" -c "$clients" -j 2 \
            -T "${KINDRED_BENCH_PGBENCH_SECONDS:-10}" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')"
        awk -v tps="$tps" -v rows="$rows" -v clients="$clients" 'BEGIN {
            printf "pgbench, PostgreSQL alone: %d swipes + %d outbox rows per transaction, %d clients: %.0f swipes/s\n",
                rows, rows, clients, tps * rows }'
    done
    echo "load average after pgbench: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
