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
# The database's work: PostgreSQL runs with pg_stat_statements, whose counters (and the table statistics) are
# reset when the measured window starts (after setup and the warm-up), so the statements printed at the end -
# per service (its database role), calls, mean time, plans made and planning time, rows per call - are the
# window's (planning is tracked: a statement planned at every call shows it). Before the driver starts,
# the script adds KINDRED_BENCH_BALLAST members (default 100000) straight into profile's and match's tables, in a
# community nobody in the load belongs to, with locations and 5 swipes each: the planner then chooses its plans
# at a realistic size, not at the load's 1,000 members.
#
# Usage: Tests/Benchmarks/mixed-load.sh [kindred-load mixed options, e.g. --users 1000 --concurrency 64 --seconds 20]
# Settings: KINDRED_BIN_DIR (ready release binaries: no build), KINDRED_BENCH_PERF=1, KINDRED_BENCH_BALLAST
# (members added by SQL, 0 = none), KINDRED_BENCH_STATEMENTS (statements printed, default 40).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh

release_binaries auth-server profile-server discovery-server match-server chat-server gateway-server notify-server \
    kindred kindred-load

WORK="$(mktemp -d /tmp/kindred-mixed.XXXXXX)"
chmod 755 "$WORK"
BASE="$(free_port_base)"
# Access logs off (they measure the disk, not the services); the per-client limits lifted (export_load_limits).
export KINDRED_CLUSTER_DIR="$WORK/run" KINDRED_DATA_DIR="$WORK/data" KINDRED_PORT_BASE="$BASE" \
    KINDRED_SMTP_PORT=$((BASE + 150)) KINDRED_LOG_LEVEL=warning \
    KINDRED_GATEWAY_ACCESS_LOG=false KINDRED_AUTH_ACCESS_LOG=false KINDRED_PROFILE_ACCESS_LOG=false \
    KINDRED_DISCOVERY_ACCESS_LOG=false KINDRED_MATCH_ACCESS_LOG=false KINDRED_CHAT_ACCESS_LOG=false
export_load_limits
export KINDRED_POSTGRES_SETTINGS="shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.max = 2000
pg_stat_statements.track = top
pg_stat_statements.track_planning = on"

start_cluster "$WORK"
wait_for_cluster "$WORK/cluster.log" "$CLUSTER"
cluster_sql "$WORK/cluster.log"
sql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
BALLAST="${KINDRED_BENCH_BALLAST:-100000}"
if [ "$BALLAST" -gt 0 ]; then
    started=$SECONDS
    sql -v n="$BALLAST" <<'SQL'
BEGIN;
CREATE TEMP TABLE ballast AS SELECT gen_random_uuid() AS id, g FROM generate_series(1, :n) AS g;
INSERT INTO profile.communities (id, display_name, settings) VALUES ('bench-ballast', 'Ballast', '');
INSERT INTO profile.profiles (user_id, community_id, fields) SELECT id::text, 'bench-ballast', '' FROM ballast;
-- Cells of precision 7 around the load's city (u33d...), so the rows look like the load's own.
INSERT INTO profile.locations (user_id, cell, updated_at)
SELECT id::text, 'u33d' || substr(md5(g::text), 1, 3), now() FROM ballast;
INSERT INTO match.communities (community_id, mode, daily_like_limit, undo_window_seconds, daily_undo_limit, version)
VALUES ('bench-ballast', 1, 100, 60, 3, 1);
INSERT INTO match.members (user_id, community_id, eligible, profile_version) SELECT id, 'bench-ballast', true, 1
FROM ballast;
INSERT INTO match.swipes (swiper, target, community_id, swipe_id, action, swiped_at, outcome)
SELECT a.id, b.id, 'bench-ballast', gen_random_uuid(), 1 + (a.g + k) % 2, now() - make_interval(secs => k * 3600), 1
FROM ballast a CROSS JOIN generate_series(1, 5) AS k JOIN ballast b ON b.g = 1 + (a.g * 7 + k * 7919) % :n
ON CONFLICT DO NOTHING;
COMMIT;
ANALYZE;
SQL
    echo "ballast: $BALLAST members with locations and 5 swipes each in profile's and match's tables, $((SECONDS - started)) s"
fi

echo "binaries $KINDRED_BIN_DIR, $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
OUT="$WORK/kindred-load.out"
: >"$OUT"
# The servers first planned their statements while their tables were empty (the ANALYZE above came before the
# setup filled the members', threads' and event relays' tables), and PostgreSQL keeps a cached plan until the table's
# statistics change: a cluster that has run a while has had them gathered (autovacuum, after its first minute), a
# 20 s run has not. One ANALYZE as the warm-up starts gives the run the plans a running cluster has (with a small
# sample, so that it ends within the warm-up: the ballast's tables make a full one take 5-9 s under the load).
(until grep -q '^mixed load:' "$OUT"; do sleep 0.1; done
    sql -c "SET default_statistics_target = 10" -c "ANALYZE" >/dev/null 2>&1) &
ANALYZE=$!
# The statistics of the measured window only: reset once the driver's 3 s warm-up is over.
(until grep -q '^mixed load:' "$OUT"; do sleep 0.1; done
    sleep 3
    sql -c "SELECT pg_stat_statements_reset(), pg_stat_reset()" >/dev/null) &
RESET=$!
if [ "${KINDRED_BENCH_PERF:-}" = 1 ]; then
    # 10 s of the measured window (after setup and the 3 s warm-up): every server and PostgreSQL process.
    (until grep -q '^mixed load:' "$OUT"; do sleep 0.2; done
        sleep 4
        postmaster="$(awk '$1 == "postgres" { print $2 }' "$WORK/run/pids")"
        pids="$(awk '$1 != "run-cluster" && $1 != "smtp-sink" { print $2 }' "$WORK/run/pids"; pgrep -P "$postmaster")"
        perf record -g -o "$WORK/perf.data" -p "$(paste -sd, - <<<"$pids")" -- sleep 10 >/dev/null 2>&1) &
    PERF=$!
fi
stdbuf -oL "$KINDRED_BIN_DIR/kindred-load" mixed --gateway "127.0.0.1:$BASE" --key-file "$WORK/data/auth/signing-key.pem" \
    --pids-file "$WORK/run/pids" "$@" | tee "$OUT"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
wait "$RESET" "$ANALYZE" || true
# Where PostgreSQL's time went in the window: the tables read most by sequential scans, and the busiest by index;
# then every statement by service (database role), with calls, mean and total time, plans made and their time,
# and rows per call; ordered by execution and planning time together.
sql -c "SELECT schemaname || '.' || relname AS table, seq_scan, seq_tup_read, idx_scan,
    n_tup_ins + n_tup_upd + n_tup_del AS writes FROM pg_stat_user_tables
    ORDER BY seq_tup_read DESC, idx_scan DESC LIMIT 10" || true
sql -c "SELECT sum(calls) AS statements, round(sum(total_exec_time)::numeric, 0) AS total_ms,
    sum(plans) AS plans, round(sum(total_plan_time)::numeric, 0) AS plan_ms,
    (SELECT sum(xact_commit) FROM pg_stat_database) AS commits FROM pg_stat_statements" || true
LIMIT="${KINDRED_BENCH_STATEMENTS:-40}"
[[ "$LIMIT" =~ ^[0-9]+$ ]] || LIMIT=40
sql -c "SELECT replace(r.rolname, 'kindred_', '') AS role, s.calls,
    round(s.mean_exec_time::numeric, 3) AS mean_ms, round(s.total_exec_time::numeric, 0) AS total_ms,
    s.plans, round(s.total_plan_time::numeric, 0) AS plan_ms,
    round(s.rows::numeric / greatest(s.calls, 1), 1) AS rows_per_call, s.shared_blks_hit + s.shared_blks_read AS blocks,
    left(regexp_replace(s.query, '\s+', ' ', 'g'), 150) AS query
    FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
    ORDER BY s.total_exec_time + s.total_plan_time DESC LIMIT $LIMIT" || true
if [ -n "${PERF:-}" ]; then
    wait "$PERF" || true
    perf report -i "$WORK/perf.data" --no-children --sort comm,dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -30
    perf report -i "$WORK/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
fi
