#!/usr/bin/env bash
# What WAL archiving (services/postgres/wal-archive.sh, on by default in services/run-cluster.sh) costs the
# durable write path: pgbench against a private PostgreSQL with run-cluster.sh's durability settings (fsync,
# synchronous_commit on), transactions shaped like match's swipe group commit (16 swipe rows and 16 outbox rows),
# alternating rounds with archiving off and on (the same archive_command run-cluster.sh writes). Prints swipes per
# second per round and the archive's size. docs/operations.md, "Backup and restore".
#
# Usage: Tests/Benchmarks/wal-archive-cost.sh [ROUNDS (3)] [SECONDS per round (20)] [CLIENTS (16)]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=services/postgres/wal-archive.sh
source services/postgres/wal-archive.sh
# shellcheck source=Tests/Benchmarks/lib/cluster.sh
source Tests/Benchmarks/lib/cluster.sh
ROUNDS="${1:-3}" SECONDS_PER_ROUND="${2:-20}" CLIENTS="${3:-16}"
WORK="$(mktemp -d /tmp/kindred-wal-bench.XXXXXX)"
mkdir -p "$WORK/archive"
private_postgres "$WORK"
echo "include_if_exists = 'kindred.conf'" >>"$WORK/data/postgresql.conf"
cat >"$WORK/swipes.sql" <<'SQL'
BEGIN;
INSERT INTO swipes (swiper, target, action) SELECT gen_random_uuid(), gen_random_uuid(), 1 FROM generate_series(1, 16);
INSERT INTO outbox (partition_key, payload) SELECT gen_random_uuid(), decode(repeat('ab', 60), 'hex') FROM generate_series(1, 16);
COMMIT;
SQL
export PGHOST="$WORK/socket" PGUSER=postgres
for ((round = 1; round <= ROUNDS; round++)); do
    for mode in off on; do
        as_postgres find "$WORK/archive" -mindepth 1 -delete
        {
            if [ "$mode" = on ]; then wal_archive_settings "$WORK/archive" 60; else wal_archive_settings off 60; fi
            printf '%s\n' "listen_addresses = ''" "unix_socket_directories = '$WORK/socket'" "fsync = on" \
                "synchronous_commit = on"
        } | as_postgres tee "$WORK/data/kindred.conf" >/dev/null
        as_postgres "$PG_BIN/pg_ctl" -D "$WORK/data" -l "$WORK/postgres.log" -w start >/dev/null
        "$PG_BIN/psql" -X -q -d postgres -c "DROP TABLE IF EXISTS swipes, outbox" -c "CREATE TABLE swipes (swiper uuid,
            target uuid, action smallint, created_at timestamptz DEFAULT now(), PRIMARY KEY (swiper, target))" \
            -c "CREATE TABLE outbox (sequence bigserial PRIMARY KEY, partition_key uuid, payload bytea,
            created_at timestamptz DEFAULT now())" -c CHECKPOINT 2>/dev/null
        tps="$("$PG_BIN/pgbench" -n -c "$CLIENTS" -j 2 -T "$SECONDS_PER_ROUND" -f "$WORK/swipes.sql" postgres 2>/dev/null \
            | sed -n 's/^tps = \([0-9.]*\).*/\1/p')"
        as_postgres "$PG_BIN/pg_ctl" -D "$WORK/data" -m fast -w stop >/dev/null # archives what is left
        printf 'round %d, archiving %-3s: %6.0f swipes/s; archive: %d segments, %s\n' "$round" "$mode" \
            "$(awk -v t="$tps" 'BEGIN { print t * 16 }')" "$(find "$WORK/archive" -name '*.zst' | wc -l)" \
            "$(du -sh "$WORK/archive" | cut -f1)"
    done
done
echo "(load average: $(cut -d' ' -f1-3 /proc/loadavg))"
