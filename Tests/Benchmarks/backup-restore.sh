#!/usr/bin/env bash
# Backup and point-in-time restore times for a bigger database than the cluster test's: services/backup.sh and
# services/restore.sh against a PostgreSQL laid out as services/run-cluster.sh lays it out (data in
# $KINDRED_DATA_DIR/postgres, WAL archived into $KINDRED_DATA_DIR/wal-archive with the same archive_command),
# filled by pgbench (-i -s SCALE: 15 MB a scale step) and written to by pgbench while the backup runs and after it.
# The restore goes to a time T between two minutes of writes; the script checks that the restored
# pgbench_history holds exactly the rows committed up to T. docs/operations.md, "Backup and restore".
#
# Usage: Tests/Benchmarks/backup-restore.sh [SCALE (100, ~1.5 GB)] [SECONDS of writes before and after T (30)]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=services/postgres/wal-archive.sh
source services/postgres/wal-archive.sh
SCALE="${1:-100}" WRITE_SECONDS="${2:-30}"
PG_BIN="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d | sort -V | tail -n 1)"
WORK="$(mktemp -d /tmp/kindred-backup-bench.XXXXXX)"
DATA="$WORK/data"
mkdir -p "$DATA/postgres" "$DATA/wal-archive" "$WORK/socket" "$WORK/logs"
if [ "$(id -u)" -eq 0 ]; then
    chmod 0755 "$WORK" "$DATA"
    chown -R postgres: "$DATA/postgres" "$DATA/wal-archive" "$WORK/socket" "$WORK/logs"
    as_postgres() { runuser -u postgres -- "$@"; }
else
    as_postgres() { "$@"; }
fi
stop() {
    as_postgres "$PG_BIN/pg_ctl" -D "$DATA/postgres" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap stop EXIT
as_postgres "$PG_BIN/initdb" -D "$DATA/postgres" -U postgres -A trust -E UTF8 --locale=C >/dev/null
echo "include_if_exists = 'kindred.conf'" >>"$DATA/postgres/postgresql.conf"
{
    printf '%s\n' "listen_addresses = ''" "unix_socket_directories = '$WORK/socket'" "fsync = on" "synchronous_commit = on"
    wal_archive_settings "$DATA/wal-archive" 60
} | as_postgres tee "$DATA/postgres/kindred.conf" >/dev/null
as_postgres "$PG_BIN/pg_ctl" -D "$DATA/postgres" -l "$WORK/logs/postgres.log" -w start >/dev/null
export PGHOST="$WORK/socket" PGUSER=postgres
"$PG_BIN/createdb" bench
echo "Filling: pgbench -i -s $SCALE ..."
"$PG_BIN/pgbench" -i -q -s "$SCALE" bench 2>&1 | tail -n 1
size="$("$PG_BIN/psql" -X -A -t -d bench -c "SELECT pg_size_pretty(pg_database_size('bench'))")"
writes() { "$PG_BIN/pgbench" -n -c 4 -j 2 -T "$1" bench 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }

echo "Database: $size. Backing up while pgbench writes..."
writes $((WRITE_SECONDS * 2)) >"$WORK/tps-1" &
load=$!
sleep 2
KINDRED_DATA_DIR="$DATA" services/backup.sh --to "$WORK/backups" | grep '^Backed up'
wait "$load"
target="$("$PG_BIN/psql" -X -A -t -d bench -c "SELECT now()")"
committed="$("$PG_BIN/psql" -X -A -t -d bench -c "SELECT count(*) FROM pgbench_history")"
writes "$WRITE_SECONDS" >"$WORK/tps-2"
total="$("$PG_BIN/psql" -X -A -t -d bench -c "SELECT count(*) FROM pgbench_history")"
"$PG_BIN/psql" -X -A -t -d bench -c "SELECT pg_switch_wal()" >/dev/null
sleep 3
archive="$(du -sh "$DATA/wal-archive" | cut -f1) in $(find "$DATA/wal-archive" -name '*.zst' | wc -l) segments"
as_postgres "$PG_BIN/pg_ctl" -D "$DATA/postgres" -m fast -w stop >/dev/null
echo "Writes: $(cat "$WORK/tps-1") tx/s during the backup, $(cat "$WORK/tps-2") after T; $committed history rows at T, $total at the end; WAL archive $archive"

services/restore.sh --from "$WORK/backups" --to-data "$WORK/restored" --target-time "$target" \
    --wal-archive "$DATA/wal-archive" | grep -E '^Restored|recovery stopping'
as_postgres "$PG_BIN/pg_ctl" -D "$WORK/restored/postgres" -o "-c unix_socket_directories='$WORK/socket' -c archive_mode=off" \
    -l "$WORK/logs/restored.log" -w start >/dev/null
restored="$("$PG_BIN/psql" -X -A -t -d bench -c "SELECT count(*) FROM pgbench_history")"
as_postgres "$PG_BIN/pg_ctl" -D "$WORK/restored/postgres" -m fast -w stop >/dev/null
echo "Restored pgbench_history: $restored rows (at T: $committed)"
[ "$restored" = "$committed" ] || { echo "backup-restore: the restore does not hold exactly what was committed at T" >&2; exit 1; }
echo "(load average: $(cut -d' ' -f1-3 /proc/loadavg))"
