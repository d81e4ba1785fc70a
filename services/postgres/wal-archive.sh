# shellcheck shell=bash
# WAL archiving of the native cluster's PostgreSQL, shared by services/run-cluster.sh (which archives),
# services/restore.sh (which replays) and services/backup.sh. Sourced, not run.
#
# PostgreSQL's own archiver copies every finished 16 MB WAL segment into the archive folder, compressed with
# zstd (a segment closed early by archive_timeout is mostly zeros: a few hundred KB), as <segment>.zst. The copy
# goes to a temporary name, is fsync'd and renamed, then the folder is fsync'd: a segment in the archive is whole
# and durable. A segment already archived is accepted again only if its bytes are the same (PostgreSQL re-runs
# the command after a crash between copying and recording it). When the command fails (folder gone, disk full)
# PostgreSQL keeps the segment in pg_wal and retries: nothing is skipped, pg_wal grows until it succeeds.

# Refuses a folder the generated shell commands could not quote safely.
wal_archive_check_folder() { # wal_archive_check_folder DIR
    case "$1" in
        /*) ;;
        *) echo "wal-archive: the archive folder must be an absolute path: $1" >&2; return 1 ;;
    esac
    if [[ "$1" == *[\"\'\$\`\\%[:cntrl:]]* ]]; then
        echo "wal-archive: the archive folder may not contain quotes, \$, \`, \\, % or control characters: $1" >&2
        return 1
    fi
}

# The archive_command value for archive folder DIR (PostgreSQL replaces %p and %f).
wal_archive_command() { # wal_archive_command DIR
    local dir="$1"
    printf '%s' "f=\"$dir/%f.zst\"; if [ -f \"\$f\" ]; then zstd -d -q -c \"\$f\" | cmp -s - \"%p\"; " \
        "else zstd -q -1 -f -o \"\$f.part\" \"%p\" && sync \"\$f.part\" && mv \"\$f.part\" \"\$f\" && sync \"$dir\"; fi"
}

# The restore_command value that reads segments back from archive folder DIR.
wal_restore_command() { # wal_restore_command DIR
    printf '%s' "zstd -d -q -f -o \"%p\" \"$1/%f.zst\""
}

# postgresql.conf lines: archiving into DIR with segments closed at least every TIMEOUT seconds (the most WAL a
# lost machine can take with it), or archiving off when DIR is "off".
wal_archive_settings() { # wal_archive_settings DIR TIMEOUT
    if [ "$1" = off ]; then
        printf '%s\n' "archive_mode = off"
        return
    fi
    printf '%s\n' "archive_mode = on" "archive_command = '$(wal_archive_command "$1")'" "archive_timeout = $2"
}
