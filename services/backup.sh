#!/usr/bin/env bash
# Backs up a running native Kindred cluster (services/run-cluster.sh) while it serves: a base backup of each of its
# PostgreSQL servers with pg_basebackup (one, or several with run-cluster.sh --databases), plus the files that are
# not in a database. With the WAL archives that run-cluster.sh keeps (KINDRED_WAL_ARCHIVE_DIR, and <archive>-N for
# server N), services/restore.sh brings the cluster back to any moment between the end of this backup and the last
# archived WAL segment. docs/operations.md, "Backup and restore".
#
# Usage: services/backup.sh [--to DIR] [--keep N] [--photos-only]
#   --to DIR   where backups go (default $KINDRED_BACKUP_DIR, else .backups); each run adds DIR/<UTC time>/:
#                postgres/     pg_basebackup, plain format, with the WAL that makes it consistent (-X stream)
#                              and its backup_manifest, checked afterwards with pg_verifybackup
#                postgres-N/   the same of server N, when the cluster runs several (services/postgres/servers.sh)
#                files/        every other folder of $KINDRED_DATA_DIR: auth/ (auth's signing key), secrets/ (service
#                              secrets, the media URL and location keys: without them restored members move on the
#                              map and every issued URL and page token stops working); not nats/ (--nats: the
#                              JetStream store; a restored cluster starts on empty streams and its relays publish
#                              their outboxes again)
#                kindred-backup.txt  what was backed up, from where, and per server the first WAL segment a
#                              restore needs and its WAL archive
#              and, with KINDRED_PROFILE_PHOTO_DIR set (photos in a folder instead of PostgreSQL), DIR/photos/:
#              the content-addressed photo files, copied after the base backup and only added to, never deleted
#              from (profile writes a photo's bytes before the row that refers to them, and deletes them after
#              the last row went).
#   --keep N   afterwards keep only the N newest backups in DIR and remove archived WAL segments older than the
#              oldest one kept (pg_archivecleanup, in every server's archive); default: keep everything
#   --photos-only  only add new photo files to DIR/photos (cheap: run it every few minutes, as the WAL archive
#              runs continuously; a restore target needs the photos its rows refer to copied after it)
# Settings: KINDRED_DATA_DIR (default .data), KINDRED_WAL_ARCHIVE_DIR (default $KINDRED_DATA_DIR/wal-archive),
# KINDRED_PROFILE_PHOTO_DIR. The backup holds secrets: DIR is made 0700; keep it (and the WAL archive) on
# another machine or disk than the cluster.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$ROOT/$1" ;; esac; }
fail() { printf 'backup: %s\n' "$*" >&2; exit 1; }

DEST="${KINDRED_BACKUP_DIR:-.backups}"
KEEP=""
PHOTOS_ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
        --to) DEST="${2:?--to needs a folder}"; shift 2 ;;
        --keep) KEEP="${2:?--keep needs a number}"; shift 2 ;;
        --photos-only) PHOTOS_ONLY=1; shift ;;
        -h | --help) sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) fail "unknown argument $1 (usage: backup.sh [--to DIR] [--keep N] [--photos-only])" ;;
    esac
done
[ -z "$KEEP" ] || [[ "$KEEP" =~ ^[1-9][0-9]*$ ]] || fail "--keep takes a number of backups, 1 or more"
DEST="$(absolute "$DEST")"
DATA_DIR="$(absolute "${KINDRED_DATA_DIR:-.data}")"
WAL_ARCHIVE="${KINDRED_WAL_ARCHIVE_DIR:-$DATA_DIR/wal-archive}"
[ "$WAL_ARCHIVE" = off ] || WAL_ARCHIVE="$(absolute "$WAL_ARCHIVE")"
PG_BIN="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
[ -x "$PG_BIN/pg_basebackup" ] || fail "PostgreSQL binaries not found in /usr/lib/postgresql/*/bin"
# shellcheck source=services/postgres/servers.sh
source services/postgres/servers.sh

# The servers: postgres, then postgres-2, ... as long as their data folders exist (services/postgres/servers.sh).
SERVER_NAMES=()
for ((number = 1; ; number++)); do
    name="$(pg_server_name "$number")"
    [ -d "$DATA_DIR/$name" ] || break
    SERVER_NAMES+=("$name")
done
[ ${#SERVER_NAMES[@]} -gt 0 ] || fail "no PostgreSQL data in $DATA_DIR/postgres (start the cluster first)"
# The lines of kindred-backup.txt for server NAME: "KEY:" for the first, "KEY NAME:" for the others.
info_key() { if [ "$1" = postgres ]; then echo "$2"; else echo "$2 $1"; fi; }
# Connects psql and pg_basebackup to running server NAME: postmaster.pid names its socket folder (line 5) and port (line 4).
connect_to() { # connect_to NAME
    local data="$DATA_DIR/$1" postmaster
    [ -f "$data/postmaster.pid" ] || fail "no PostgreSQL is running on $data (start the cluster first)"
    mapfile -t postmaster <"$data/postmaster.pid"
    kill -0 "${postmaster[0]}" 2>/dev/null || fail "PostgreSQL (pid ${postmaster[0]}) of $data is not running"
    export PGHOST="${postmaster[4]}" PGPORT="${postmaster[3]}" PGUSER=postgres
}
psql() { "$PG_BIN/psql" -X -A -t -v ON_ERROR_STOP=1 -d postgres -c "$1"; }
for name in "${SERVER_NAMES[@]}"; do
    connect_to "$name"
    archive_mode="$(psql "SHOW archive_mode")"
    if [ "$WAL_ARCHIVE" = off ] || [ "$archive_mode" = off ]; then
        echo "backup: note: WAL archiving is off on $name; this backup restores only to the moment it ended" >&2
    fi
done

# New photo files into DEST/photos (shared by every backup in DEST: the names are their content's SHA-256).
copy_photos() {
    [ -n "${KINDRED_PROFILE_PHOTO_DIR:-}" ] || return 0
    local photo_dir
    photo_dir="$(absolute "$KINDRED_PROFILE_PHOTO_DIR")"
    [ -d "$photo_dir" ] || fail "KINDRED_PROFILE_PHOTO_DIR $photo_dir is not a folder"
    mkdir -p "$DEST/photos"
    chmod 0700 "$DEST"
    # Whole files only: profile writes each to a temporary dot-name and renames it into place.
    rsync -a --ignore-existing --exclude='.*' "$photo_dir/" "$DEST/photos/" || fail "copying the photos failed"
    photos="$photo_dir, copied into $DEST/photos ($(find "$DEST/photos" -type f | wc -l) files)"
}
if [ -n "$PHOTOS_ONLY" ]; then
    [ -n "${KINDRED_PROFILE_PHOTO_DIR:-}" ] || fail "--photos-only: KINDRED_PROFILE_PHOTO_DIR is not set (photos are in PostgreSQL)"
    copy_photos
    echo "Photos: $photos."
    exit 0
fi

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
TARGET="$DEST/$STAMP"
[ ! -e "$TARGET" ] || fail "$TARGET exists already (two backups within one second?)"
mkdir -p "$DEST"
chmod 0700 "$DEST"
mkdir "$TARGET"
seconds_since() { awk -v start="$1" -v now="$EPOCHREALTIME" 'BEGIN { printf "%.1f", now - start }'; }
started=$EPOCHREALTIME
# One server after the other, each while it serves; a restore brings all of them to one target time.
# A fast checkpoint starts the copy at once instead of after the next scheduled one.
SERVER_INFO=""
for ((number = 1; number <= ${#SERVER_NAMES[@]}; number++)); do
    name="${SERVER_NAMES[$((number - 1))]}"
    connect_to "$name"
    "$PG_BIN/pg_basebackup" -D "$TARGET/$name" -F plain -X stream -c fast --manifest-checksums=SHA256 \
        -l "kindred $STAMP $name" || { rm -rf "$TARGET"; fail "pg_basebackup of $name failed"; }
    "$PG_BIN/pg_verifybackup" -q "$TARGET/$name" || fail "pg_verifybackup found $TARGET/$name damaged"
    start_wal="$(sed -n 's/^START WAL LOCATION: .* (file \([0-9A-F]*\))$/\1/p' "$TARGET/$name/backup_label")"
    services="$(cat "$DATA_DIR/$name/kindred-services" 2>/dev/null || echo every service)"
    SERVER_INFO+="$(printf '%-15s %s\n' "$name:" "$DATA_DIR/$name (PostgreSQL $(cat "$DATA_DIR/$name/PG_VERSION"), $services)")
$(printf '%-15s %s\n' "$(info_key "$name" "start wal"):" "$start_wal")
$(printf '%-15s %s\n' "$(info_key "$name" "wal archive"):" "$(pg_server_archive "$WAL_ARCHIVE" "$number") (archive_mode $(psql "SHOW archive_mode"))")
"
done
database_seconds="$(seconds_since "$started")"

# Every other folder of the data folder: auth's signing key (auth/), the service secrets (secrets/), and whatever
# a server keeps in its KINDRED_<SERVER>_DATA_DIR. Not the JetStream store (nats/): its streams hold events up to
# now, while a restore brings the databases back to an earlier moment (and a copy of a live store is torn); the
# restored relays find their streams new and publish their outboxes again (docs/operations.md).
mkdir "$TARGET/files"
skip=("$(realpath -m "$DATA_DIR/nats")")
for ((number = 1; number <= ${#SERVER_NAMES[@]}; number++)); do
    skip+=("$(realpath "$DATA_DIR/${SERVER_NAMES[$((number - 1))]}")" "$(realpath -m "$(pg_server_archive "$WAL_ARCHIVE" "$number")")")
done
[ -z "${KINDRED_PROFILE_PHOTO_DIR:-}" ] || skip+=("$(realpath -m "$(absolute "$KINDRED_PROFILE_PHOTO_DIR")")")
shopt -s nullglob
for folder in "$DATA_DIR"/*/; do
    folder="$(realpath "$folder")"
    [[ " ${skip[*]} " != *" $folder "* && "$(realpath -m "$DEST")/" != "$folder/"* ]] || continue
    cp -a "$folder" "$TARGET/files/"
done
shopt -u nullglob

photos="not in a folder (KINDRED_PROFILE_PHOTO_DIR unset): they are in PostgreSQL, table profile.photo_blobs"
copy_photos

cat >"$TARGET/kindred-backup.txt" <<INFO
created:        $STAMP
${SERVER_INFO}photos:         $photos
INFO
sync -f "$TARGET/kindred-backup.txt"

if [ -n "$KEEP" ]; then
    mapfile -t backups < <(find "$DEST" -mindepth 1 -maxdepth 1 -type d -name '20*Z' | sort)
    for ((i = 0; i < ${#backups[@]} - KEEP; i++)); do
        echo "Removing the old backup ${backups[$i]}"
        rm -rf "${backups[$i]}"
    done
    first_kept=$((${#backups[@]} > KEEP ? ${#backups[@]} - KEEP : 0))
    oldest="${backups[$first_kept]}"
    for ((number = 1; number <= ${#SERVER_NAMES[@]}; number++)); do
        key="$(info_key "${SERVER_NAMES[$((number - 1))]}" "start wal")"
        oldest_wal="$(sed -n "s/^$key: *//p" "$oldest/kindred-backup.txt")"
        archive="$(pg_server_archive "$WAL_ARCHIVE" "$number")"
        if [ "$archive" != off ] && [ -n "$oldest_wal" ]; then
            "$PG_BIN/pg_archivecleanup" -x .zst "$archive" "$oldest_wal"
        fi
    done
fi

echo "Backed up to $TARGET in $(seconds_since "$started") s (database $database_seconds s, $(du -sh "$TARGET" | cut -f1))."
echo "Restore with: services/restore.sh --from $TARGET --to-data NEW_DATA_DIR [--target-time 'YYYY-MM-DD HH:MM:SS+00']"
