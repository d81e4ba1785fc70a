# Sourced by the benchmark scripts: a cluster started with services/run-cluster.sh in the background, or a
# PostgreSQL server of their own (private_postgres).

# free_port_base: prints a port base at which every port a cluster listens on is free: gRPC (base+0..6), admin
# (+100..106), SMTP (+150), media (+200), local push peers (+300..302), NATS (+310..315). The cluster tests' choice
# (Tests/Cluster/cluster_harness.py): below the kernel's ephemeral range, where an outgoing connection (to
# PostgreSQL, between the services, the driver's) cannot take a port before the cluster binds it.
free_port_base() {
    PYTHONPATH=Tests/Cluster python3 -c 'from cluster_harness import free_port_base; print(free_port_base()[0])'
}

# export_load_limits: lifts the per-client and per-account limits, which protect against abuse, not against a
# benchmark whose members all come from 127.0.0.1.
export_load_limits() {
    export KINDRED_GATEWAY_CLIENT_RATE=1000000 KINDRED_GATEWAY_CLIENT_BURST=1000000 \
        KINDRED_GATEWAY_ACCOUNT_RATE=1000000 KINDRED_GATEWAY_ACCOUNT_BURST=1000000 \
        KINDRED_MATCH_SWIPE_RATE=1000000 KINDRED_MATCH_SWIPE_BURST=1000000 \
        KINDRED_DISCOVERY_VIEWER_RATE=1000000 KINDRED_DISCOVERY_VIEWER_BURST=1000000 \
        KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT=10000
}

# release_binaries PRODUCT...: KINDRED_BIN_DIR, exported: the ready binaries it already names, or else a release build
# of each PRODUCT (the build's bin path).
release_binaries() {
    if [ -z "${KINDRED_BIN_DIR:-}" ]; then
        local product
        for product in "$@"; do swift build -c release --product "$product"; done
        KINDRED_BIN_DIR="$(swift build -c release --show-bin-path)"
    fi
    export KINDRED_BIN_DIR
}

# start_cluster WORK [run-cluster.sh arguments]: starts services/run-cluster.sh in its own session, logging to
# WORK/cluster.log, with its process id in CLUSTER; on exit stops it and removes WORK.
start_cluster() {
    local work="$1"
    shift
    setsid services/run-cluster.sh "$@" >"$work/cluster.log" 2>&1 </dev/null &
    CLUSTER=$!
    CLUSTER_WORK="$work"
    trap stop_cluster EXIT
}

# stop_cluster: TERM, because a background job ignores INT (bash), so run-cluster.sh would never see it.
stop_cluster() {
    kill -TERM "$CLUSTER" 2>/dev/null || true
    wait "$CLUSTER" 2>/dev/null || true
    grep -q "Kindred stopped." "$CLUSTER_WORK/cluster.log" || tail -n 20 "$CLUSTER_WORK/cluster.log"
    rm -rf "$CLUSTER_WORK"
}

# wait_for_cluster LOG PID [PATTERN] [SECONDS]: returns once run-cluster.sh (PID, writing LOG) has printed a line
# matching PATTERN (default "Kindred is up"); if it exits first, or nothing matches within SECONDS (default 120),
# prints its log and exits 1.
wait_for_cluster() {
    local pattern="${3:-Kindred is up}" seconds="${4:-120}"
    for _ in $(seq $((seconds * 5))); do
        grep -q -e "$pattern" "$1" && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.2
    done
    cat "$1"
    exit 1
}

# cluster_sql LOG: makes `sql` (psql as the postgres user on the cluster's database, stopping at the first error)
# from the (first) db line run-cluster.sh printed in LOG. That line comes a moment after "Kindred is up", so it is
# waited for (up to 10 s).
cluster_sql() {
    local line=""
    for _ in $(seq 100); do
        line="$(sed -n 's/^ *db: *\(\S*\) "\(.*\)"$/\1 \2/p' "$1" | head -n 1)"
        [ -n "$line" ] && break
        sleep 0.1
    done
    [ -n "$line" ] || { echo "no db line in $1" >&2; exit 1; }
    read -r CLUSTER_PSQL CLUSTER_DB_URL <<<"$line"
}
sql() { runuser -u postgres -- "$CLUSTER_PSQL" -X -q -v ON_ERROR_STOP=1 -P pager=off "$CLUSTER_DB_URL" "$@"; }

# private_postgres WORK: for a benchmark with a PostgreSQL server of its own in WORK/data (socket in WORK/socket):
# sets PG_BIN (the newest installed server), makes WORK the server user's (as root: postgres, as initdb refuses
# root), defines as_postgres to run its tools as that user, runs initdb, and on exit stops the server and removes WORK.
private_postgres() {
    PRIVATE_POSTGRES_WORK="$1"
    PG_BIN="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d | sort -V | tail -n 1)"
    mkdir -p "$1/data" "$1/socket"
    if [ "$(id -u)" -eq 0 ]; then
        chmod 0755 "$1"
        chown -R postgres: "$1"
        as_postgres() { runuser -u postgres -- "$@"; }
    else
        as_postgres() { "$@"; }
    fi
    trap stop_private_postgres EXIT
    as_postgres "$PG_BIN/initdb" -D "$1/data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
}

stop_private_postgres() {
    as_postgres "$PG_BIN/pg_ctl" -D "$PRIVATE_POSTGRES_WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$PRIVATE_POSTGRES_WORK"
}
