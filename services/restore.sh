#!/usr/bin/env bash
# Restores a Kindred cluster from a backup of services/backup.sh into a new data folder, to a point in time:
# the base backup of each PostgreSQL server is copied, each replays its archived WAL up to the same target time
# (recovery.signal, restore_command, recovery_target_time) and is promoted, then stopped; auth's signing key, the service secrets
# and (when the backup has them) the photo files are put beside it. Then start the services on it:
#   KINDRED_DATA_DIR=DIR services/run-cluster.sh
# Events, decks and chat streams need no manual step: the outboxes, their cursors and every consumer's tables
# come back from the same moment, discovery rebuilds its index from its tables at start; on NATS JetStream (--nats)
# the streams start empty and each relay publishes its outbox again. docs/operations.md, "Backup and restore".
#
# Usage: services/restore.sh --from BACKUP --to-data DIR [--target-time TIME] [--wal-archive ARCHIVE]
#                            [--photo-dir PHOTOS]
#   --from BACKUP        one backup (a folder DEST/<UTC time> made by backup.sh), or DEST itself: then the newest
#                        backup made before TIME (or the newest one)
#   --to-data DIR        the new data folder (KINDRED_DATA_DIR of the restored cluster); must not hold a database
#   --target-time TIME   restore everything committed up to TIME (PostgreSQL timestamp, e.g.
#                        '2026-11-27 03:12:45.5+00'); default: everything the archive holds
#   --wal-archive DIR    the WAL archive to replay (default: the one the backup's kindred-backup.txt names); of a
#                        cluster of several servers, the first one's: server N's is DIR-N, as run-cluster.sh names it
#   --photo-dir PHOTOS   where to put the photo files of a backup that has them (default DIR/photos; start the
#                        restored cluster with KINDRED_PROFILE_PHOTO_DIR=PHOTOS)
# Settings: KINDRED_RESTORE_TIMEOUT seconds the WAL replay may take (default 86400).
# Exit status: 0 restored; 1 nothing usable was made (the reason is printed), or the database was restored but
# photo files it refers to are missing (listed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=services/postgres/wal-archive.sh
source services/postgres/wal-archive.sh
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$ROOT/$1" ;; esac; }
fail() { printf 'restore: %s\n' "$*" >&2; exit 1; }
seconds_since() { awk -v start="$1" -v now="$EPOCHREALTIME" 'BEGIN { printf "%.1f", now - start }'; }

FROM="" DATA_DIR="" TARGET_TIME="" ARCHIVE="" PHOTO_DIR=""
while [ $# -gt 0 ]; do
    case "$1" in
        --from) FROM="${2:?--from needs a backup folder}"; shift 2 ;;
        --to-data) DATA_DIR="${2:?--to-data needs a folder}"; shift 2 ;;
        --target-time) TARGET_TIME="${2:?--target-time needs a time}"; shift 2 ;;
        --wal-archive) ARCHIVE="${2:?--wal-archive needs a folder}"; shift 2 ;;
        --photo-dir) PHOTO_DIR="${2:?--photo-dir needs a folder}"; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) fail "unknown argument $1 (see services/restore.sh --help)" ;;
    esac
done
if [ -z "$FROM" ] || [ -z "$DATA_DIR" ]; then fail "--from and --to-data are required (see services/restore.sh --help)"; fi
FROM="$(absolute "$FROM")"
DATA_DIR="$(absolute "$DATA_DIR")"
[[ "$TARGET_TIME" != *[\'\\[:cntrl:]]* ]] || fail "--target-time may not contain quotes, \\ or control characters"
PG_BIN="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
[ -x "$PG_BIN/pg_ctl" ] || fail "PostgreSQL binaries not found in /usr/lib/postgresql/*/bin"

# The backup: a folder of backups means the newest one made before the target (their names are UTC times, which
# sort in time order and compare with the target once written the same way).
if [ ! -f "$FROM/kindred-backup.txt" ]; then
    mapfile -t backups < <(find "$FROM" -mindepth 2 -maxdepth 2 -name kindred-backup.txt -printf '%h\n' | sort)
    [ ${#backups[@]} -gt 0 ] || fail "$FROM holds no backup of services/backup.sh"
    chosen=""
    before="$(date -u -d "${TARGET_TIME:-now}" +%Y%m%dT%H%M%SZ 2>/dev/null)" || fail "cannot read the time $TARGET_TIME"
    for backup in "${backups[@]}"; do [[ "$(basename "$backup")" < "$before" ]] && chosen="$backup"; done
    [ -n "$chosen" ] || fail "no backup in $FROM was made before $TARGET_TIME"
    FROM="$chosen"
fi
[ -d "$FROM/postgres" ] || fail "$FROM has no postgres/ folder"
BACKUPS_ROOT="$(dirname "$FROM")"
# shellcheck source=services/postgres/servers.sh
source services/postgres/servers.sh
# The servers the backup holds: postgres, then postgres-2, ... (services/postgres/servers.sh).
SERVER_NAMES=()
for ((number = 1; ; number++)); do
    name="$(pg_server_name "$number")"
    [ -d "$FROM/$name" ] || break
    SERVER_NAMES+=("$name")
done
# The WAL archive of server NUMBER (NAME): --wal-archive's (<archive>-N for server N), else the backup's note.
archive_of() { # archive_of NUMBER NAME
    local key="wal archive" archive
    [ "$2" = postgres ] || key="wal archive $2"
    if [ -n "$ARCHIVE" ]; then
        archive="$(pg_server_archive "$(absolute "$ARCHIVE")" "$1")"
    else
        archive="$(sed -n "s/^$key: *\(.*\) (archive_mode .*$/\1/p" "$FROM/kindred-backup.txt")"
    fi
    if [ -z "$archive" ] || [ "$archive" = off ]; then fail "the backup names no WAL archive for $2: give --wal-archive"; fi
    archive="$(absolute "$archive")"
    [ -d "$archive" ] || fail "the WAL archive $archive is not a folder"
    wal_archive_check_folder "$archive" || exit 1
    echo "$archive"
}
for ((number = 1; number <= ${#SERVER_NAMES[@]}; number++)); do
    name="${SERVER_NAMES[$((number - 1))]}"
    archive_of "$number" "$name" >/dev/null
    if [ -e "$DATA_DIR/$name" ] && [ -n "$(ls -A "$DATA_DIR/$name")" ]; then
        fail "$DATA_DIR/$name is not empty: restore into a new folder"
    fi
done

started=$EPOCHREALTIME
echo "Restoring $FROM (${SERVER_NAMES[*]}) into $DATA_DIR${TARGET_TIME:+, to $TARGET_TIME}..."
mkdir -p "$DATA_DIR"
LOG="$DATA_DIR/restore-postgres.log"
: >"$LOG"
SOCKET="$(mktemp -d /tmp/kindred-restore.XXXXXX)" # every server's socket (ports 5432, 5433, ...)
if [ "$(id -u)" -eq 0 ]; then
    as_postgres() { runuser -u postgres -- "$@"; }
    chown postgres: "$SOCKET" "$LOG"
    chmod 0755 "$DATA_DIR"
else
    as_postgres() { "$@"; }
fi
RESTORED=() # data folders of the servers restored so far, running until the end
cleanup() {
    local data
    for data in "${RESTORED[@]}"; do
        if [ -f "$data/postmaster.pid" ]; then as_postgres "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >>"$LOG" 2>&1; fi
    done
    rm -rf "$SOCKET"
}
trap cleanup EXIT
replay_failed() { # replay_failed DATA
    if [ -f "$1/postmaster.pid" ]; then as_postgres "$PG_BIN/pg_ctl" -D "$1" -m immediate -w stop >>"$LOG" 2>&1 || true; fi
    tail -n 15 "$LOG" | sed 's/^/    /' >&2
    local data
    for data in "${RESTORED[@]}"; do # half replayed: nothing anyone should start
        if [ -f "$data/postmaster.pid" ]; then as_postgres "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >>"$LOG" 2>&1 || true; fi
        rm -rf "$data"
    done
    RESTORED=()
    fail "the WAL replay failed (log above, in $LOG); nothing was restored"
}
export PGHOST="$SOCKET" PGUSER=postgres
psql() { "$PG_BIN/psql" -X -A -t -v ON_ERROR_STOP=1 -p "$PGPORT" -d "${2:-postgres}" -c "$1"; }

# Server NUMBER: the base backup copied, then its WAL replayed to the target (every server to the same one) and
# promoted; it keeps running (on port 5431 + NUMBER of the private socket folder) until the end.
# run-cluster.sh rewrites kindred.conf on every start, so the recovery settings end with this run. Archiving is
# off while replaying (the restored cluster archives into its own folders once run-cluster.sh starts it).
restore_server() { # restore_server NUMBER
    local name="${SERVER_NAMES[$(($1 - 1))]}" archive data postmaster deadline
    archive="$(archive_of "$1" "$name")"
    data="$DATA_DIR/$name"
    echo "  $name: replaying WAL from $archive..."
    cp -a "$FROM/$name" "$data"
    chmod 0700 "$data"
    RESTORED+=("$data")
    {
        echo "# Written by services/restore.sh for the WAL replay; run-cluster.sh replaces it."
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$SOCKET'"
        echo "port = $(pg_server_port "$1")"
        echo "archive_mode = off"
        echo "hot_standby = off"
        echo "restore_command = '$(wal_restore_command "$archive")'"
        [ -z "$TARGET_TIME" ] || echo "recovery_target_time = '$TARGET_TIME'"
        echo "recovery_target_action = 'promote'"
    } >"$data/kindred.conf"
    grep -q "^include_if_exists = 'kindred.conf'" "$data/postgresql.conf" \
        || echo "include_if_exists = 'kindred.conf'" >>"$data/postgresql.conf"
    touch "$data/recovery.signal"
    [ "$(id -u)" -ne 0 ] || chown -R postgres: "$data"
    # The replay: pg_ctl returns once the server runs (with hot_standby off it answers no query before the end);
    # the replay is over when a query finds it promoted. A target the archive does not reach stops the server
    # ("recovery ended before configured recovery target was reached").
    export PGPORT
    PGPORT="$(pg_server_port "$1")"
    deadline=$((SECONDS + ${KINDRED_RESTORE_TIMEOUT:-86400}))
    # shellcheck disable=SC2094 # pg_ctl appends to the log itself, as its own messages do
    as_postgres "$PG_BIN/pg_ctl" -D "$data" -l "$LOG" -w -t "${KINDRED_RESTORE_TIMEOUT:-86400}" start >>"$LOG" 2>&1 \
        || replay_failed "$data"
    until [ "$(psql "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ]; do
        postmaster="$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)"
        if [ -z "$postmaster" ] || ! kill -0 "$postmaster" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            replay_failed "$data"
        fi
        sleep 0.2
    done
}
for ((number = 1; number <= ${#SERVER_NAMES[@]}; number++)); do restore_server "$number"; done
replay_seconds="$(seconds_since "$started")"
grep -E "recovery stopping|last completed transaction|archive recovery complete|redo done" "$LOG" | sed 's/^/    /' || true

# Auth's signing key and the service secrets, as they were. Never a JetStream store (nats/, which backups made
# before backup.sh left it out hold): the restored cluster starts NATS on empty streams, not on those of a
# timeline the databases no longer have.
if [ -d "$FROM/files" ]; then
    for folder in "$FROM/files"/* "$FROM/files"/.[!.]*; do
        if [ -e "$folder" ] && [ "$(basename "$folder")" != nats ]; then cp -a "$folder" "$DATA_DIR/"; fi
    done
fi

missing=0
if [ -d "$BACKUPS_ROOT/photos" ]; then
    PHOTO_DIR="$(absolute "${PHOTO_DIR:-$DATA_DIR/photos}")"
    mkdir -p "$PHOTO_DIR"
    rsync -a --ignore-existing "$BACKUPS_ROOT/photos/" "$PHOTO_DIR/"
    # Every rendition the restored rows refer to must be there (a photo uploaded and deleted again between two
    # backups of the folder is not, if the target falls between its upload and its deletion). On the server
    # holding profile's schema.
    database="$(sed -n 's/^KINDRED_DATABASE=//p' services/cluster.env)"
    for ((number = 1; number <= ${#SERVER_NAMES[@]}; number++)); do
        services="$(cat "$DATA_DIR/${SERVER_NAMES[$((number - 1))]}/kindred-services" 2>/dev/null || echo profile)"
        [[ " $services " == *" profile "* ]] && PGPORT="$(pg_server_port "$number")"
    done
    while read -r key; do
        [ -z "$key" ] || [ -f "$PHOTO_DIR/${key:0:2}/$key" ] || { echo "    missing photo file $key" >&2; missing=$((missing + 1)); }
    done < <(psql "SELECT DISTINCT blob_key FROM profile.photo_variants" "$database")
fi
cleanup
trap - EXIT
for data in "${RESTORED[@]}"; do
    echo "# The replay's settings are gone; services/run-cluster.sh writes this file on every start." >"$data/kindred.conf"
done

echo "Restored in $(seconds_since "$started") s (the database copied, replayed and promoted after $replay_seconds s)."
if [ "$missing" -gt 0 ]; then
    fail "the database is restored, but $missing photo files it refers to are missing from $PHOTO_DIR"
fi
# The layout the servers were made with (run-cluster.sh starts them only with that one).
layout=""
if [ ${#SERVER_NAMES[@]} -gt 1 ]; then
    for name in "${SERVER_NAMES[@]}"; do
        services="$(cat "$DATA_DIR/$name/kindred-services")"
        layout+="${layout:+:}${services// /,}"
    done
fi
echo "Start it with: KINDRED_DATA_DIR=$DATA_DIR${PHOTO_DIR:+ KINDRED_PROFILE_PHOTO_DIR=$PHOTO_DIR}${layout:+ KINDRED_DATABASES=$layout} services/run-cluster.sh"
echo "Then take a new backup (services/backup.sh): the restored database continues on a new timeline."
