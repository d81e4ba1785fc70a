#!/usr/bin/env bash
# What each service stores per member and per row, measured on a populated cluster: the figures docs/scale.md
# multiplies out to 100 million members.
#
# It starts a cluster (services/run-cluster.sh --demo on a free port range in a temporary folder): the demo seed
# signs members up through the gateway (accounts, sessions, profiles, generated photos, swipes, matches, threads),
# then `kindred-load mixed` adds a short run of decks, swipes and chat messages. At the end it prints, per table
# (heap + indexes + TOAST, after VACUUM), rows, bytes and bytes per row; per service (schema), bytes per member;
# and the bytes per photo with all its renditions (the photo store is the database by default).
#
# Usage: Tests/Benchmarks/storage-per-member.sh [members signed up, default 600] [seconds of mixed load, default 30]
# Settings: KINDRED_STORAGE_LOAD_MEMBERS (the mixed load's members, default 3000), KINDRED_BIN_DIR (ready binaries: no build; the default builds debug binaries, which store the same rows).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh

MEMBERS="${1:-600}"
SECONDS_OF_LOAD="${2:-30}"
LOAD_MEMBERS="${KINDRED_STORAGE_LOAD_MEMBERS:-3000}"
[[ "$MEMBERS" =~ ^[0-9]+$ && "$SECONDS_OF_LOAD" =~ ^[0-9]+$ ]] || { echo "usage: $0 [members] [seconds]" >&2; exit 2; }

if [ -z "${KINDRED_BIN_DIR:-}" ]; then
    for product in auth-server profile-server discovery-server match-server chat-server gateway-server notify-server \
        kindred kindred-load; do
        swift build --product "$product"
    done
    KINDRED_BIN_DIR="$(swift build --show-bin-path)"
fi
export KINDRED_BIN_DIR

WORK="$(mktemp -d /tmp/kindred-storage.XXXXXX)"
chmod 755 "$WORK"
BASE="$(free_port_base)"
export KINDRED_CLUSTER_DIR="$WORK/run" KINDRED_DATA_DIR="$WORK/data" KINDRED_PORT_BASE="$BASE" \
    KINDRED_SMTP_PORT=$((BASE + 150)) KINDRED_LOG_LEVEL=warning KINDRED_DEMO_MEMBERS="$MEMBERS"
export_load_limits
start_cluster "$WORK" --demo
# "Kindred is up" comes before the seed; "Demo ready." after it (a few hundred members take minutes on a busy
# machine, each with generated photos). A seed that gave up part way (on a starved machine a member's profile can
# take longer than the seed waits to reach match) still leaves rows to measure; say so.
wait_for_cluster "$WORK/cluster.log" "$CLUSTER" 'Demo ready\.\|the demo seed failed' 7200
grep -q "Demo ready\." "$WORK/cluster.log" || echo "the seed stopped early: $(grep -c 'members ready' "$WORK/cluster.log") progress lines; measuring what it stored"
cluster_sql "$WORK/cluster.log"

if [ "$SECONDS_OF_LOAD" -gt 0 ]; then
    "$KINDRED_BIN_DIR/kindred-load" mixed --gateway "127.0.0.1:$BASE" --key-file "$WORK/data/auth/signing-key.pem" \
        --users "$LOAD_MEMBERS" --pairs $((LOAD_MEMBERS / 5)) --subscribers $((LOAD_MEMBERS / 5 < 50 ? LOAD_MEMBERS / 5 : 50)) --concurrency 32 --seconds "$SECONDS_OF_LOAD" | grep -E '^(setup|mixed|total)' || true
fi
# The relay and purge loops settle; then dead rows are vacuumed away so the sizes are the live rows'.
sleep 5
sql -c "VACUUM (ANALYZE)" >/dev/null

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); members signed up: $MEMBERS (+$LOAD_MEMBERS mixed-load members with profiles)"
# Every table with rows: exact row counts, and everything stored for it (heap, free space map, indexes, TOAST).
sql <<'SQL'
CREATE TEMP TABLE sizes AS
SELECT n.nspname AS schema, c.relname AS table_name,
       (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I.%I', n.nspname, c.relname),
              false, true, '')))[1]::text::bigint AS rows,
       pg_table_size(c.oid) AS heap, pg_indexes_size(c.oid) AS indexes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('auth', 'profile', 'discovery', 'match', 'chat', 'notify');
\echo 'per table with 500 rows or more (smaller ones are mostly empty pages); bytes include indexes'
SELECT schema || '.' || table_name AS table, rows, pg_size_pretty(heap + indexes) AS stored,
       round((heap + indexes)::numeric / rows) AS bytes_per_row, round(indexes::numeric / rows) AS of_which_indexes
FROM sizes WHERE rows >= 500 ORDER BY schema, heap + indexes DESC;
\echo 'per service: members = accounts (auth), profiles (profile), members (match), users (chat, discovery: projection)'
SELECT schema, pg_size_pretty(sum(heap + indexes)) AS stored,
       round(sum(heap + indexes)::numeric / nullif(CASE schema
           WHEN 'auth' THEN (SELECT count(*) FROM auth.accounts)
           WHEN 'profile' THEN (SELECT count(*) FROM profile.profiles)
           WHEN 'match' THEN (SELECT count(*) FROM match.members)
           WHEN 'chat' THEN (SELECT count(*) FROM chat.users)
           WHEN 'notify' THEN (SELECT count(*) FROM profile.profiles)
           ELSE (SELECT count(*) FROM profile.profiles) END, 0)) AS bytes_per_member
FROM sizes GROUP BY schema ORDER BY schema;
SQL
sql -c "SELECT count(*) AS photos,
    round((pg_total_relation_size('profile.photos') + pg_total_relation_size('profile.photo_variants')
        + pg_total_relation_size('profile.photo_blobs'))::numeric / nullif(count(*), 0)) AS bytes_per_photo_all_renditions
    FROM profile.photos"
