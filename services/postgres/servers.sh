# shellcheck shell=bash
# The PostgreSQL servers of the native cluster: which services' schemas each one holds, and where each keeps its
# data, socket, log and WAL archive. Shared by services/run-cluster.sh, services/backup.sh and services/restore.sh.
# Sourced, not run.
#
# The layout (KINDRED_DATABASES, or run-cluster.sh --databases N):
#   empty or 1   one server holding every service of KINDRED_SERVERS_WITH_TABLES (the default);
#   N (2..6)     N servers: the services of KINDRED_SERVERS_WITH_TABLES in their order, cut into N runs of sizes as
#                equal as possible; 2 = auth,profile,discovery : match,chat,notify;
#                3 = auth,profile : discovery,match : chat,notify;
#   a list       groups of services separated by ':', services of a group by ',', e.g.
#                "auth,profile,notify:match,chat,discovery"; every service with tables exactly once.
# No service reads another's schema (each connects as its own role, to its own schema; events between them travel
# through the outboxes and the relay), so any grouping works.
#
# Server 1 is "postgres": data $KINDRED_DATA_DIR/postgres, socket folder $KINDRED_CLUSTER_DIR/postgres, port 5432,
# log postgres.log, WAL archive $KINDRED_WAL_ARCHIVE_DIR. Server N > 1 is "postgres-N": data postgres-N, socket
# folder postgres-N, port 5431 + N, log postgres-N.log, WAL archive <archive>-N. Each data folder holds the file
# kindred-services naming the services whose schemas it holds: a data folder made with one layout is not started
# with another (the services' tables would be on the wrong server).

# database_layout SPEC SERVICES -> DB_GROUPS: one "service service ..." entry per server; 1 (and a reason on
# stderr) when SPEC is not a layout of SERVICES.
database_layout() {
    local spec="$1" names group i count size extra start name
    read -r -a names <<<"$2"
    DB_GROUPS=()
    if [ -z "$spec" ]; then spec=1; fi
    if [[ "$spec" =~ ^[0-9]+$ ]]; then
        count=$spec
        if ((count < 1 || count > ${#names[@]})); then
            echo "databases: $count servers for ${#names[@]} services: give 1 to ${#names[@]}" >&2
            return 1
        fi
        size=$((${#names[@]} / count))
        extra=$((${#names[@]} % count))
        start=0
        for ((i = 0; i < count; i++)); do
            group=$((size + (i < extra ? 1 : 0)))
            DB_GROUPS+=("${names[*]:start:group}")
            start=$((start + group))
        done
        return 0
    fi
    local seen=" " groups
    IFS=: read -r -a groups <<<"$spec"
    for group in "${groups[@]}"; do
        [ -n "$group" ] || { echo "databases: an empty group in $spec" >&2; return 1; }
        local members=()
        IFS=, read -r -a members <<<"$group"
        for name in "${members[@]}"; do
            if [[ " ${names[*]} " != *" $name "* ]]; then
                echo "databases: $name has no tables (services with tables: ${names[*]})" >&2
                return 1
            fi
            if [[ "$seen" == *" $name "* ]]; then echo "databases: $name is in two groups" >&2; return 1; fi
            seen+="$name "
        done
        DB_GROUPS+=("${members[*]}")
    done
    for name in "${names[@]}"; do
        [[ "$seen" == *" $name "* ]] || { echo "databases: $name is in no group of $spec" >&2; return 1; }
    done
}

# Names and places of server N (1-based).
pg_server_name() { if [ "$1" = 1 ]; then echo postgres; else echo "postgres-$1"; fi; }
pg_server_port() { echo $((5431 + $1)); }
# The WAL archive of server N, from the first server's archive folder (or off).
pg_server_archive() { # pg_server_archive ARCHIVE N
    if [ "$1" = off ] || [ "$2" = 1 ]; then echo "$1"; else echo "$1-$2"; fi
}
# The number of the server holding SERVICE's schema (DB_GROUPS set by database_layout).
pg_server_of() {
    local i
    for i in "${!DB_GROUPS[@]}"; do
        if [[ " ${DB_GROUPS[$i]} " == *" $1 "* ]]; then echo $((i + 1)); return; fi
    done
    return 1
}
