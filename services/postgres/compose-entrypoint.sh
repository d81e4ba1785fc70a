#!/usr/bin/env bash
# The compose PostgreSQL's entrypoint (compose.yaml): WAL archiving as services/run-cluster.sh sets it up, then the
# image's own docker-entrypoint.sh with the given command. Runs as root (the image's default user): it makes the
# archive volume the postgres user's (a new named volume belongs to root), and the image's entrypoint then steps
# down to postgres.
#   KINDRED_WAL_ARCHIVE_DIR      the archive folder, a volume (off = no archiving)
#   KINDRED_WAL_ARCHIVE_TIMEOUT  seconds after which a partly filled WAL segment is archived anyway (default 60)
set -euo pipefail
# shellcheck source=services/postgres/wal-archive.sh
source "$(dirname "${BASH_SOURCE[0]}")/wal-archive.sh"
archive="${KINDRED_WAL_ARCHIVE_DIR:?KINDRED_WAL_ARCHIVE_DIR names the archive folder (or off)}"
timeout="${KINDRED_WAL_ARCHIVE_TIMEOUT:-60}"
[[ "$timeout" =~ ^[0-9]+$ ]] || { echo "KINDRED_WAL_ARCHIVE_TIMEOUT is not a number: $timeout" >&2; exit 1; }
settings=(-c archive_mode=off)
if [ "$archive" != off ]; then
    wal_archive_check_folder "$archive"
    mkdir -p "$archive"
    chown postgres:postgres "$archive"
    chmod 0700 "$archive"
    settings=(-c archive_mode=on -c "archive_command=$(wal_archive_command "$archive")" -c "archive_timeout=$timeout")
fi
exec docker-entrypoint.sh "$@" "${settings[@]}"
