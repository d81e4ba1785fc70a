#!/usr/bin/env bash
# Runs the whole Kindred cluster on this machine, in the foreground, until Ctrl-C (or SIGTERM):
#   1. installs missing Debian/Python packages (services/install-deps.sh; as root, else it says what to run);
#   2. builds the servers and the `kindred` CLI (release), unless KINDRED_BIN_DIR names ready binaries;
#   3. starts a private PostgreSQL (data in $KINDRED_DATA_DIR/postgres, kept between runs; unix socket only,
#      in a private folder), or several (--databases), creates the database and one role per service with tables
#      (services/postgres/init-roles.sh, shared with compose.yaml), runs every server's migrations as its role;
#   4. starts a development SMTP sink (services/smtp-sink): mails become files, codes appear in its log; and
#      local APNs, FCM and Web Push peers (Tests/Peers): pushes are checked and recorded instead of leaving the machine;
#   5. starts every server that exists (auth, ..., then the gateway), each waited for until SERVING;
#   6. prints "Kindred is up: gateway at 127.0.0.1:<port>", then watches: a server that dies stops the cluster.
# Ctrl-C/SIGTERM: servers get SIGTERM (gateway first; each drains and exits 0), then the push peers and the sink,
# then PostgreSQL (fast shutdown); exit 0 when all of them stopped cleanly.
#
# Settings (environment; defaults in services/cluster.env):
#   KINDRED_BIN_DIR       folder with <server>-server binaries and kindred; set = no build
#   KINDRED_BUILD_PATH    SwiftPM scratch path of the build (default .build)
#   KINDRED_CLUSTER_DIR   runtime folder: pids, logs/, mail/, PostgreSQL socket (default .cluster)
#   KINDRED_DATA_DIR      persistent folder: postgres/, auth/ (signing key), secrets/ (default .data)
#   KINDRED_WAL_ARCHIVE_DIR  PostgreSQL's WAL archive for point-in-time restores (services/backup.sh, restore.sh;
#                         default $KINDRED_DATA_DIR/wal-archive; off = no archiving)
#   KINDRED_WAL_ARCHIVE_TIMEOUT  seconds after which a partly filled WAL segment is archived anyway (default 60)
#   KINDRED_POSTGRES_SETTINGS  extra postgresql.conf lines (benchmarks: pg_stat_statements; default none)
#   KINDRED_DATABASES     how many PostgreSQL servers, and which services' schemas each holds (the same as
#                         --databases; services/postgres/servers.sh): a number, e.g. 2 (auth,profile,discovery and
#                         match,chat,notify), or groups, e.g. "auth,profile,notify:match,chat,discovery"; default one
#                         server. Server N > 1 keeps its data in $KINDRED_DATA_DIR/postgres-N, archives its WAL into
#                         <archive>-N and listens on the socket folder postgres-N, port 5431+N.
#   KINDRED_PORT_BASE     gRPC port of the gateway; server i of KINDRED_SERVERS gets base+i, admin base+100+i
#   KINDRED_REPLICAS_<SERVICE>  replicas of a service, gateway included (default 1, at most 4; discovery runs once):
#                         replica r of server i is named <service>.<r> (logs/<service>.<r>.log, the pids file) and
#                         listens on a port ending in 7, 8 or 9 (slot s = 3i + r - 2: base + 10(1 + s/3) + 7 + s%3;
#                         admin 100 above; a second gateway's media port base+207...), ports no other cluster's base
#                         (a multiple of 10 apart) uses; every client gets every replica's address
#   KINDRED_SMTP_PORT     SMTP sink port (default 2525)
#   The push peers listen on port base + 300 (APNs), + 301 (FCM) and + 302 (Web Push).
#   KINDRED_START_TIMEOUT seconds each step may take to come up (default 60)
#   KINDRED_ON_SERVER_EXIT  stop (default): a server exiting on its own stops the cluster; keep: the rest runs on;
#                         restart: it is started again, and so is PostgreSQL (fault tests)
#   KINDRED_STOP_WITH_PID   a process id: once the cluster is up, it stops when that process is gone (the test
#                         harnesses give their own, so a test run killed hard leaves nothing running); what it
#                         says then goes to logs/run-cluster.log
#   KINDRED_LOG_LEVEL, KINDRED_LOG_FORMAT and any KINDRED_<SERVICE>_* setting not set here pass through.
# $KINDRED_CLUSTER_DIR/pids lists "name pid" per line (run-cluster, postgres, smtp-sink, apns-peer, auth, ...).
#
# --demo: a cluster to try: the per-address limits on sign-ups and calls are lifted (every demo member signs up
# from 127.0.0.1; settings given in the environment win), and once the cluster is up it runs
# `kindred admin seed` (the four preset communities, a few hundred members in five cities with generated photos,
# swipes and matches; the same seed gives the same members, and a restart finds them instead of duplicating
# them), prints how to sign in as one of them and "Demo ready.", then keeps running as usual.
#   KINDRED_DEMO_SEED     seed number (default 1)       KINDRED_DEMO_MEMBERS  how many members (default 300)
#
# Push peers (development, on by default): notify sends to local peers with throwaway keys made for the run
# (CA, .p8 key, service-account key, VAPID key in $KINDRED_CLUSTER_DIR/push), each of which checks every push as the
# real service would and appends it to $KINDRED_CLUSTER_DIR/logs/<peer>.jsonl, as the sink does for mail:
#   apns-peer (Tests/Peers/apns_peer.py): the provider token (ES256), topic dev.kindred.app, headers and payload;
#   fcm-peer (fcm_peer.py): the service account's RS256 grant, then messages:send of project kindred-dev;
#   webpush-peer (webpush_peer.py): hands out subscriptions at /subscribe, checks VAPID, decrypts each push.
# A provider whose key is set in the environment (KINDRED_NOTIFY_APNS_KEY_FILE, KINDRED_NOTIFY_FCM_SERVICE_ACCOUNT_FILE,
# KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE, with the settings services/notify/README.md lists) goes where the
# environment says, and its peer is not started.
# --no-push-peers: no peer; notify uses the providers the environment configures and skips the others.
# --databases N|GROUPS: several PostgreSQL servers (KINDRED_DATABASES above); each service gets its server's URL.
# --standby: also a streaming standby of the server holding profile's schema (pg_basebackup -R over its socket,
# made afresh on every start; data in $KINDRED_CLUSTER_DIR/postgres-standby-data, port 5440); profile reads the
# members' cards for decks and lists from it (KINDRED_PROFILE_READ_DATABASE_URL), never a member's own data.
# --web-push-peer: the same as the default (all three peers).
#
# --discovery-shards=N (or KINDRED_DISCOVERY_SHARD_COUNT=N; default 1): discovery as N geographic shards
# (services/discovery/README.md, "Shards"): shard 0 is the discovery server, shard i runs as discovery_i on port
# base + 20 + i (admin base + 120 + i) with its own projection (schema discovery_i, role kindred_discovery) and its
# own consumer name for every producer's events; the gateway, profile and match route to the viewer's shard.
#
# --nats (or KINDRED_NATS=1): events travel on NATS JetStream instead of the PostgreSQL push relay: a three-node
# JetStream cluster on loopback (nats-server; client ports base + 310..312, routes base + 313..315, stores in
# $KINDRED_DATA_DIR/nats/n<i>, logs nats-<i>.log), and every server gets KINDRED_EVENTS_NATS_URL naming the three.
set -euo pipefail

DEMO=""
PUSH_PEERS=1
NATS="${KINDRED_NATS:-}"
DATABASES="${KINDRED_DATABASES:-}"
STANDBY=""
WANT_DATABASES=""
for argument in "$@"; do
    if [ -n "$WANT_DATABASES" ]; then DATABASES="$argument" WANT_DATABASES=""; continue; fi
    case "$argument" in
        --databases) WANT_DATABASES=1 ;;
        --databases=*) DATABASES="${argument#--databases=}" ;;
        --standby) STANDBY=1 ;;
        --demo) DEMO=1 ;;
        --push-peers | --web-push-peer) PUSH_PEERS=1 ;;
        --no-push-peers) PUSH_PEERS="" ;;
        --discovery-shards=*) KINDRED_DISCOVERY_SHARD_COUNT="${argument#--discovery-shards=}" ;;
        --nats) NATS=1 ;;
        -h | --help) sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) printf 'run-cluster: unknown argument %s (usage: run-cluster.sh [--demo] [--no-push-peers] [--nats] [--databases N|GROUPS] [--standby])\n' "$argument" >&2; exit 2 ;;
    esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=services/cluster.env
source services/cluster.env
# shellcheck source=services/postgres/wal-archive.sh
source services/postgres/wal-archive.sh
# shellcheck source=services/postgres/servers.sh
source services/postgres/servers.sh

absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$ROOT/$1" ;; esac; }
say() { printf '%s\n' "$*"; }
fail() { printf 'run-cluster: %s\n' "$*" >&2; exit 1; }

PORT_BASE="${KINDRED_PORT_BASE:-$KINDRED_DEFAULT_PORT_BASE}"
SMTP_PORT="${KINDRED_SMTP_PORT:-$KINDRED_DEFAULT_SMTP_PORT}"
START_TIMEOUT="${KINDRED_START_TIMEOUT:-60}"
STOP_WITH_PID="${KINDRED_STOP_WITH_PID:-}"
for number in "$PORT_BASE" "$SMTP_PORT" "$START_TIMEOUT" ${STOP_WITH_PID:+"$STOP_WITH_PID"}; do
    [[ "$number" =~ ^[0-9]+$ ]] || fail "not a number: $number"
done
((PORT_BASE >= 1024 && PORT_BASE + KINDRED_ADMIN_PORT_OFFSET + 10 < 65536)) || fail "KINDRED_PORT_BASE out of range"
CLUSTER_DIR="$(absolute "${KINDRED_CLUSTER_DIR:-.cluster}")"
DATA_DIR="$(absolute "${KINDRED_DATA_DIR:-.data}")"
LOG_DIR="$CLUSTER_DIR/logs"
PUSH_DIR="$CLUSTER_DIR/push" # the push peers' throwaway keys
MAIL_DIR="$CLUSTER_DIR/mail"
PIDS="$CLUSTER_DIR/pids"
read -r -a SERVERS <<<"$KINDRED_SERVERS"
[ -z "$WANT_DATABASES" ] || fail "--databases needs a number of servers or a layout"
database_layout "$DATABASES" "$KINDRED_SERVERS_WITH_TABLES" || exit 2
export KINDRED_LOG_LEVEL="${KINDRED_LOG_LEVEL:-info}" KINDRED_LOG_FORMAT="${KINDRED_LOG_FORMAT:-text}"
DEMO_SEED="${KINDRED_DEMO_SEED:-1}"
DEMO_MEMBERS="${KINDRED_DEMO_MEMBERS:-300}"
if [ -n "$DEMO" ]; then
    [[ "$DEMO_SEED" =~ ^[0-9]+$ && "$DEMO_MEMBERS" =~ ^[0-9]+$ ]] || fail "KINDRED_DEMO_SEED and KINDRED_DEMO_MEMBERS are numbers"
    # Everyone is 127.0.0.1 here: the seed signs up hundreds of members within a minute or two.
    export KINDRED_GATEWAY_CLIENT_RATE="${KINDRED_GATEWAY_CLIENT_RATE:-100000}" \
        KINDRED_GATEWAY_CLIENT_BURST="${KINDRED_GATEWAY_CLIENT_BURST:-100000}" \
        KINDRED_GATEWAY_ANONYMOUS_RATE="${KINDRED_GATEWAY_ANONYMOUS_RATE:-100000}" \
        KINDRED_GATEWAY_ANONYMOUS_BURST="${KINDRED_GATEWAY_ANONYMOUS_BURST:-100000}" \
        KINDRED_AUTH_IP_REQUESTS_PER_MINUTE="${KINDRED_AUTH_IP_REQUESTS_PER_MINUTE:-100000}" \
        KINDRED_AUTH_MAIL_PER_IP_PER_HOUR="${KINDRED_AUTH_MAIL_PER_IP_PER_HOUR:-100000}"
fi

port_of() { # port_of NAME[.REPLICA] [admin]
    local i offset=0 service="${1%%.*}" replica=1
    case "$1" in discovery_[0-9]*) discovery_shard_port "$@"; return ;; esac
    [ -n "${2:-}" ] && offset=$KINDRED_ADMIN_PORT_OFFSET
    [[ "$1" == *.* ]] && replica="${1#*.}"
    for i in "${!SERVERS[@]}"; do
        if [ "${SERVERS[$i]}" = "$service" ]; then
            local slot=$((3 * i + replica - 2))
            if ((replica == 1)); then echo $((PORT_BASE + offset + i)); else echo $((PORT_BASE + offset + 10 * (1 + slot / 3) + 7 + slot % 3)); fi
            return
        fi
    done
    fail "unknown server $1"
}
# Replicas (KINDRED_REPLICAS_<SERVICE>): the instances of a service are <service>, <service>.2, <service>.3...
replicas_of() { # replicas_of SERVICE -> how many run
    local variable="KINDRED_REPLICAS_${1^^}" count
    count="${!variable:-1}"
    [[ "$count" =~ ^[1-4]$ ]] || fail "$variable must be 1...4"
    if [ "$1" = discovery ] && ((count > 1)); then count=1; fi # one index per cluster (shards are another setting)
    echo "$count"
}
instances_of() { # instances_of SERVICE -> its instance names
    local r
    echo "$1"
    for ((r = 2; r <= $(replicas_of "$1"); r++)); do echo "$1.$r"; done
}
addresses_of() { # addresses_of SERVICE [separator] -> host:port of every replica, comma-separated
    local instance list=""
    for instance in $(instances_of "$1"); do list+="${list:+${2:-,}}127.0.0.1:$(port_of "$instance")"; done
    echo "$list"
}
for name in "${SERVERS[@]}"; do replicas_of "$name" >/dev/null; done
has_tables() { [[ " $KINDRED_SERVERS_WITH_TABLES " == *" $1 "* ]]; }

# Discovery's shards beyond the first (--discovery-shards=N): their names, ports, schemas and the callers' list.
DISCOVERY_SHARD_COUNT="${KINDRED_DISCOVERY_SHARD_COUNT:-1}"
[[ "$DISCOVERY_SHARD_COUNT" =~ ^[1-6]$ ]] || fail "--discovery-shards (KINDRED_DISCOVERY_SHARD_COUNT) must be 1..6"
discovery_shard_names() { local i; for ((i = 1; i < DISCOVERY_SHARD_COUNT; i++)); do echo "discovery_$i"; done; }
discovery_shard_port() { # discovery_shard_port discovery_I [admin]
    local offset=20
    [ -n "${2:-}" ] && offset=$((KINDRED_ADMIN_PORT_OFFSET + 20))
    echo $((PORT_BASE + offset + ${1#discovery_}))
}
discovery_shard_addresses() { # every shard in shard order, shard 0 the discovery server
    local list name
    list="127.0.0.1:$(port_of discovery)"
    for name in $(discovery_shard_names); do list+=",127.0.0.1:$(discovery_shard_port "$name")"; done
    echo "$list"
}
discovery_shards_env() { # discovery_shards_env CALLER: the caller's KINDRED_<CALLER>_DISCOVERY_SHARDS
    [ "$DISCOVERY_SHARD_COUNT" -gt 1 ] && SERVER_ENV+=("KINDRED_${1^^}_DISCOVERY_SHARDS=$(discovery_shard_addresses)")
    return 0
}
discovery_shard_setting() { # discovery_shard_setting I: shard I's KINDRED_DISCOVERY_SHARDS (none with one shard)
    [ "$DISCOVERY_SHARD_COUNT" -gt 1 ] && SERVER_ENV+=("KINDRED_DISCOVERY_SHARDS=$1/$DISCOVERY_SHARD_COUNT")
    return 0
}
server_env_discovery_shard() { # server_env_discovery_shard discovery_I: discovery's settings, its own port and schema
    INSTANCE=discovery
    server_env_common discovery
    server_env_discovery
    SERVER_ENV+=(
        "KINDRED_DISCOVERY_LISTEN=127.0.0.1:$(discovery_shard_port "$1")"
        "KINDRED_DISCOVERY_ADMIN_LISTEN=127.0.0.1:$(discovery_shard_port "$1" admin)"
        "KINDRED_DISCOVERY_DATABASE_SCHEMA=$1"
    )
    discovery_shard_setting "${1#discovery_}"
}
start_discovery_shards() { # migrated and started like the servers above, after them (producers retry meanwhile)
    local name pid waited
    for name in $(discovery_shard_names); do
        server_env "$name"
        env "${SERVER_ENV[@]}" "$BIN/discovery-server" migrate >"$LOG_DIR/$name-migrate.log" 2>&1 9>&- \
            || startup_failed "discovery-server migrate ($name) failed" "$LOG_DIR/$name-migrate.log"
        env "${SERVER_ENV[@]}" setsid "$BIN/discovery-server" serve >"$LOG_DIR/$name.log" 2>&1 9>&- </dev/null &
        pid=$!
        SERVER_PIDS+=("$name $pid")
        record_pid "$name" "$pid"
        waited=0
        WAIT_PID=$pid wait_until env "${SERVER_ENV[@]}" "$BIN/discovery-server" healthcheck 9>&- || waited=$?
        [ $waited = 0 ] || startup_failed "discovery-server ($name) did not report SERVING" "$LOG_DIR/$name.log"
        say "Started $name (pid $pid): shard ${name#discovery_} of $DISCOVERY_SHARD_COUNT, gRPC 127.0.0.1:$(port_of "$name")"
    done
}

# ---------------------------------------------------------------------------------------------------------
# One cluster per runtime folder. The lock is held by this shell only (children get fd 9 closed), so a
# cluster whose script was killed leaves its lock free and its pids file behind (handled below).
mkdir -p "$CLUSTER_DIR"
exec 9>"$CLUSTER_DIR/lock"
if ! flock -n 9; then
    {
        say "A Kindred cluster is already running from $CLUSTER_DIR:"
        [ -f "$PIDS" ] && sed 's/^/    /' "$PIDS"
        supervisor="$(awk '$1 == "run-cluster" { print $2 }' "$PIDS" 2>/dev/null || true)"
        say "Stop it with Ctrl-C in its terminal${supervisor:+, or: kill $supervisor}."
    } >&2
    exit 1
fi

# The state of /proc says whether a pid is running (a zombie is not); kill -0 would count zombies. The watch loop
# below runs this every second, so it reads with `read`, not a command substitution: bash 5.2 parses "$(...)" as
# it runs it, and a Ctrl-C arriving then ran the INT trap in the half-parsed state ("interrupt trap: line 2:
# unexpected EOF while looking for matching `)'"), so the stop ended with status 2.
alive() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat="${stat##*) }"
    [ "${stat:0:1}" != Z ]
}
# Is pid $1 still the program we started (its command line contains $2)? Guards against reused pids.
is_ours() {
    local command
    alive "$1" && command="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" && [[ "$command" == *"$2"* ]]
}

# ---------------------------------------------------------------------------------------------------------
# Leftovers of a cluster that did not stop cleanly (its script was killed): stop them before starting anew.
if [ -f "$PIDS" ]; then
    mapfile -t entries <"$PIDS"
    for ((i = ${#entries[@]} - 1; i >= 0; i--)); do # reverse start order: servers, sink, PostgreSQL
        read -r name pid <<<"${entries[$i]}"
        case "$name" in
            run-cluster) continue ;;
            postgres | postgres-*) is_ours "$pid" postgres || continue ;;
            smtp-sink) is_ours "$pid" smtp_sink.py || continue ;;
            apns-peer | fcm-peer | webpush-peer) is_ours "$pid" "${name%-peer}_peer.py" || continue ;;
            *) is_ours "$pid" "$name-server" || continue ;;
        esac
        say "Stopping $name (pid $pid), left over from a cluster that did not stop cleanly"
        if [[ "$name" == postgres* ]]; then kill -INT "$pid"; else kill -TERM "$pid"; fi
        for _ in $(seq 300); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    rm -f "$PIDS"
fi

# ---------------------------------------------------------------------------------------------------------
services/install-deps.sh

if [ -n "${KINDRED_BIN_DIR:-}" ]; then
    BIN="$(absolute "$KINDRED_BIN_DIR")"
    [ -d "$BIN" ] || fail "KINDRED_BIN_DIR $BIN is not a folder"
else
    # Only products Package.swift declares: every <name>-server of KINDRED_SERVERS, and the CLI.
    products=()
    for name in "${SERVERS[@]}"; do
        if grep -q "\.executable(name: \"$name-server\"" Package.swift; then products+=("$name-server"); fi
    done
    if grep -q '\.executable(name: "kindred"' Package.swift; then products+=(kindred); fi
    build=(swift build -c release)
    [ -n "${KINDRED_BUILD_PATH:-}" ] && build+=(--scratch-path "$KINDRED_BUILD_PATH")
    say "Building ${products[*]} (release)..."
    for product in "${products[@]}"; do "${build[@]}" --product "$product"; done
    BIN="$("${build[@]}" --show-bin-path)"
fi

# A server takes part when its binary exists and has the server contract (serve, migrate, healthcheck).
START_ORDER=()
for name in "${SERVERS[@]}"; do
    [ "$name" = gateway ] && continue
    START_ORDER+=("$name")
done
START_ORDER+=(gateway) # the front door opens last
RUNNING_ORDER=()
for name in "${START_ORDER[@]}"; do
    binary="$BIN/$name-server"
    if [ ! -x "$binary" ]; then
        say "Notice: $name-server is not in $BIN; running without the $name service."
    elif [[ "$("$binary" --help 2>&1 || true)" != *healthcheck* ]]; then
        say "Notice: $binary has no healthcheck subcommand yet; running without the $name service."
    else
        RUNNING_ORDER+=("$name")
    fi
done
[ ${#RUNNING_ORDER[@]} -gt 0 ] || fail "no server binaries in $BIN"

# Ports must be free before anything starts (a bash /dev/tcp connect succeeds only if something listens).
port_taken() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for name in $(for service in "${RUNNING_ORDER[@]}"; do instances_of "$service"; done); do
    for port in "$(port_of "$name")" "$(port_of "$name" admin)"; do
        port_taken "$port" && fail "port $port ($name) is in use: stop what uses it or set KINDRED_PORT_BASE"
    done
done
port_taken "$SMTP_PORT" && fail "port $SMTP_PORT (SMTP sink) is in use: set KINDRED_SMTP_PORT"
# --nats: three JetStream nodes, node i on client port base + 310 + i and route port base + 313 + i.
nats_port() { echo $((PORT_BASE + 310 + $1)); }
nats_route_port() { echo $((PORT_BASE + 313 + $1)); }
NATS_URL=""
if [ -n "$NATS" ]; then
    command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || fail "--nats needs nats-server (services/install-deps.sh)"
    for node in 0 1 2; do
        for port in "$(nats_port $node)" "$(nats_route_port $node)"; do
            port_taken "$port" && fail "port $port (nats-$node) is in use: set KINDRED_PORT_BASE"
        done
        NATS_URL+="${NATS_URL:+,}nats://127.0.0.1:$(nats_port $node)"
    done
fi

# The push peers to start: all unless --no-push-peers, less those whose provider the environment configures.
PEERS=()
if [ -n "$PUSH_PEERS" ]; then
    [ -n "${KINDRED_NOTIFY_APNS_KEY_FILE:-}" ] || PEERS+=(apns)
    [ -n "${KINDRED_NOTIFY_FCM_SERVICE_ACCOUNT_FILE:-}" ] || PEERS+=(fcm)
    [ -n "${KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE:-}" ] || PEERS+=(webpush)
fi
peer_port() { # peer_port apns|fcm|webpush
    case "$1" in apns) echo $((PORT_BASE + 300)) ;; fcm) echo $((PORT_BASE + 301)) ;; *) echo $((PORT_BASE + 302)) ;; esac
}
has_peer() { [[ " ${PEERS[*]} " == *" $1 "* ]]; }
for peer in "${PEERS[@]}"; do
    port_taken "$(peer_port "$peer")" \
        && fail "port $(peer_port "$peer") ($peer-peer) is in use: set KINDRED_PORT_BASE, or run with --no-push-peers"
done

# ---------------------------------------------------------------------------------------------------------
# Shutdown: reverse start order, each bounded; a second Ctrl-C skips the waiting (SIGKILL).
SERVER_PIDS=() # "name pid", in start order
declare -A EXITED=() # name -> exit status, of servers that exited while the cluster ran
ON_SERVER_EXIT="${KINDRED_ON_SERVER_EXIT:-stop}"
SINK_PID=""
PEER_PIDS=() # "name pid" of the push peers
PG_STARTED=""
PG_NAMES=() PG_DATAS=() PG_SOCKETS=() PG_PORTS=() PG_LOGS=() PG_SOCKET_TEMPS=() # the PostgreSQL servers, below
STOPPING=""
FORCE=""
stop_process() { # stop_process NAME PID SIGNAL -> sets STOP_STATUS to its exit status (128+n: killed by signal n)
    local name="$1" pid="$2" waited=0
    kill "-$3" "$pid" 2>/dev/null || true
    while alive "$pid" && [ -z "$FORCE" ] && [ $waited -lt 300 ]; do sleep 0.1; waited=$((waited + 1)); done
    if alive "$pid"; then
        say "$name did not stop within 30 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    STOP_STATUS=0
    wait "$pid" 2>/dev/null || STOP_STATUS=$?
}
stop_all() { # stop_all EXIT_STATUS
    local status="$1" i name pid
    [ -n "$STOPPING" ] && return
    STOPPING=1
    set +e
    trap 'FORCE=1' INT TERM HUP
    say "Stopping the cluster..."
    for ((i = ${#SERVER_PIDS[@]} - 1; i >= 0; i--)); do
        read -r name pid <<<"${SERVER_PIDS[$i]}"
        if [ -n "${EXITED[$name]:-}" ]; then
            say "  $name had exited before (status ${EXITED[$name]})"
            [ "${EXITED[$name]}" = 0 ] || status=1
            continue
        fi
        stop_process "$name" "$pid" TERM
        if [ "$STOP_STATUS" = 0 ]; then
            say "  $name stopped (exit 0)"
        else
            say "  $name exited with status $STOP_STATUS; last lines of $LOG_DIR/$name.log:"
            tail -n 20 "$LOG_DIR/$name.log" | sed 's/^/    /'
            status=1
        fi
    done
    for entry in "${PEER_PIDS[@]}"; do
        read -r name pid <<<"$entry"
        stop_process "$name" "$pid" TERM
        say "  $name stopped"
    done
    if [ -n "$SINK_PID" ]; then
        stop_process smtp-sink "$SINK_PID" TERM
        if [ "$STOP_STATUS" = 0 ]; then
            say "  smtp-sink stopped"
        else
            say "  smtp-sink exited with status $STOP_STATUS"
            status=1
        fi
    fi
    for ((i = ${#PG_NAMES[@]} - 1; i >= 0; i--)); do # the standby first, then the servers
        if [ -z "$PG_STARTED" ] || ! as_postgres "$PG_BIN/pg_ctl" -D "${PG_DATAS[$i]}" status >/dev/null 2>&1; then continue; fi
        if as_postgres "$PG_BIN/pg_ctl" -D "${PG_DATAS[$i]}" -m fast -w -t 60 stop >>"${PG_LOGS[$i]}" 2>&1; then
            say "  ${PG_NAMES[$i]} stopped"
        else
            say "  pg_ctl stop failed; see ${PG_LOGS[$i]}"
            status=1
        fi
    done
    for temp in "${PG_SOCKET_TEMPS[@]}"; do rm -rf "$temp"; done
    rm -f "$PIDS"
    if [ "$status" = 0 ]; then say "Kindred stopped."; else say "Kindred stopped with errors."; fi
    exit "$status"
}
# A shell that started this script in the background (without job control) made it ignore SIGINT, which bash
# then cannot trap: say how to stop it instead.
if [ -n "$(trap -p INT)" ]; then say "Note: started with Ctrl-C (SIGINT) ignored; stop the cluster with: kill $$"; fi
trap 'stop_all 0' INT TERM HUP
trap 'stop_all $?' EXIT

record_pid() { echo "$1 $2" >>"$PIDS"; }
mkdir -p "$LOG_DIR" "$MAIL_DIR" "$DATA_DIR"
: >"$PIDS"
record_pid run-cluster $$

# Waits until "$@" succeeds, at most START_TIMEOUT s, while process $WAIT_PID (if set) stays alive.
wait_until() {
    local deadline=$((SECONDS + START_TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        if [ -n "${WAIT_PID:-}" ] && ! alive "$WAIT_PID"; then return 2; fi
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}
startup_failed() { # startup_failed WHAT LOG
    say "run-cluster: $1; last lines of $2:" >&2
    tail -n 30 "$2" | sed 's/^/    /' >&2
    exit 1
}

# ---------------------------------------------------------------------------------------------------------
# PostgreSQL: the highest installed version; as root it runs as the postgres user (initdb refuses root).
PG_BIN="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
[ -x "$PG_BIN/pg_ctl" ] || fail "PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin"
WAL_ARCHIVE="${KINDRED_WAL_ARCHIVE_DIR:-$DATA_DIR/wal-archive}"
WAL_ARCHIVE_TIMEOUT="${KINDRED_WAL_ARCHIVE_TIMEOUT:-60}"
[[ "$WAL_ARCHIVE_TIMEOUT" =~ ^[0-9]+$ ]] || fail "KINDRED_WAL_ARCHIVE_TIMEOUT is not a number: $WAL_ARCHIVE_TIMEOUT"
[ "$WAL_ARCHIVE" = off ] || WAL_ARCHIVE="$(absolute "$WAL_ARCHIVE")"
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || fail "running as root, but there is no postgres user to run PostgreSQL as"
    as_postgres() { runuser -u postgres -- "$@"; }
else
    as_postgres() { "$@"; }
fi
pg_version="$(basename "$(dirname "$PG_BIN")")"
# The servers (services/postgres/servers.sh): PG_NAMES[i], PG_DATAS[i], PG_SOCKETS[i], PG_PORTS[i], PG_LOGS[i] of
# server i + 1 in DB_GROUPS' order; then the standby (--standby), if any, last.
# The socket lives in a private folder (mode 0700): only this user (and root) can connect, so trust
# authentication on it is safe. A socket path must fit in 107 bytes; long checkouts use a /tmp folder.
postgres_places() { # postgres_places NAME DATA PORT -> appends to the PG_* arrays
    local socket="$CLUSTER_DIR/$1"
    if [ ${#socket} -gt 90 ]; then
        socket="$(mktemp -d /tmp/kindred-pg.XXXXXX)"
        PG_SOCKET_TEMPS+=("$socket")
    fi
    PG_NAMES+=("$1") PG_DATAS+=("$2") PG_SOCKETS+=("$socket") PG_PORTS+=("$3") PG_LOGS+=("$LOG_DIR/$1.log")
    mkdir -p "$socket" "$2"
    chmod 0700 "$socket" "$2"
    : >"$LOG_DIR/$1.log"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres: "$socket" "$2" "$LOG_DIR/$1.log"
        as_postgres test -w "$2" -a -w "$socket" -a -w "$LOG_DIR/$1.log" \
            || fail "the postgres user cannot reach $2, $socket or $LOG_DIR/$1.log (a private parent folder?): set KINDRED_DATA_DIR/KINDRED_CLUSTER_DIR elsewhere"
    fi
}
# kindred.conf, rewritten on every start: the socket folder may move between runs.
postgres_conf() { # postgres_conf INDEX ARCHIVE_SETTINGS...
    local i="$1"
    shift
    cat >"${PG_DATAS[$i]}/kindred.conf" <<CONF
# Written by services/run-cluster.sh on every start.
listen_addresses = ''
unix_socket_directories = '${PG_SOCKETS[$i]}'
unix_socket_permissions = 0700
port = ${PG_PORTS[$i]}
fsync = on
synchronous_commit = on
$(printf '%s\n' "$@")
${KINDRED_POSTGRES_SETTINGS:-}
CONF
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "${PG_DATAS[$i]}/kindred.conf"; fi
}
# max_connections of a server: each process of its services (every replica, every discovery shard) may open its
# pool (KINDRED_<SERVER>_DATABASE_POOL_SIZE, default 10) and a few more (listeners, the notifier, relays, standby
# checks); plus room for migrations, the CLI and psql. PostgreSQL's default of 100 ran out with two replicas of every service.
max_connections_for() { # max_connections_for "SERVICES"
    local name pool processes total=40
    for name in $1; do
        pool="KINDRED_${name^^}_DATABASE_POOL_SIZE"
        processes=$(replicas_of "$name")
        [ "$name" = discovery ] && processes=$((processes + DISCOVERY_SHARD_COUNT - 1))
        total=$((total + processes * (${!pool:-10} + 10)))
    done
    echo $((total > 100 ? total : 100))
}
postgres_start() { # postgres_start INDEX
    local i="$1"
    PG_STARTED=1 # from here on, stopping includes PostgreSQL (even if pg_ctl gives up waiting for it)
    # shellcheck disable=SC2094 # pg_ctl appends to the log itself, as its own messages do
    as_postgres "$PG_BIN/pg_ctl" -D "${PG_DATAS[$i]}" -l "${PG_LOGS[$i]}" -w -t "$START_TIMEOUT" start \
        >>"${PG_LOGS[$i]}" 2>&1 9>&- || startup_failed "PostgreSQL ${PG_NAMES[$i]} did not start" "${PG_LOGS[$i]}"
    record_pid "${PG_NAMES[$i]}" "$(head -n 1 "${PG_DATAS[$i]}/postmaster.pid")"
}
# The discovery shards' projection schemas (owned by kindred_discovery), on the server holding discovery's.
extra_schemas_of() { # extra_schemas_of "SERVICES"
    if [[ " $1 " == *" discovery "* ]]; then
        for name in $(discovery_shard_names); do printf 'discovery:%s ' "$name"; done
    fi
}
# Server INDEX + 1: made on first start, then started; its database and the roles of its services.
postgres_server() { # postgres_server INDEX
    local i="$1" number=$(($1 + 1)) name data archive services
    name="$(pg_server_name "$number")"
    data="$DATA_DIR/$name"
    services="${DB_GROUPS[$i]}"
    postgres_places "$name" "$data" "$(pg_server_port "$number")"
    archive="$(pg_server_archive "$WAL_ARCHIVE" "$number")"
    if [ "$archive" != off ]; then
        wal_archive_check_folder "$archive" || exit 1
        mkdir -p "$archive"
        if [ "$(id -u)" -eq 0 ]; then chown postgres: "$archive"; fi
    fi
    if [ ! -f "$data/PG_VERSION" ]; then
        say "Creating the PostgreSQL $pg_version database $name in $data (for ${services// /, })..."
        as_postgres "$PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C >>"${PG_LOGS[$i]}" 2>&1 9>&- \
            || startup_failed "initdb failed" "${PG_LOGS[$i]}"
        echo "include_if_exists = 'kindred.conf'" >>"$data/postgresql.conf"
        echo "$services" >"$data/kindred-services"
    elif [ "$(cat "$data/PG_VERSION")" != "$pg_version" ]; then
        fail "$data was made by PostgreSQL $(cat "$data/PG_VERSION"), this machine runs $pg_version: remove it (data is lost) or install that version"
    elif [ "$(cat "$data/kindred-services" 2>/dev/null || echo "$KINDRED_SERVERS_WITH_TABLES")" != "$services" ]; then
        fail "$data holds the schemas of $(cat "$data/kindred-services" 2>/dev/null || echo "every service"), not of $services: start with the layout it was made with (KINDRED_DATABASES)"
    fi
    postgres_conf "$i" "$(wal_archive_settings "$archive" "$WAL_ARCHIVE_TIMEOUT")" \
        "max_connections = $(max_connections_for "$services")"
    postgres_start "$i"
    PGHOST="${PG_SOCKETS[$i]}" PGPORT="${PG_PORTS[$i]}" PGUSER=postgres PSQL="$PG_BIN/psql" \
        KINDRED_DATABASE="$KINDRED_DATABASE" KINDRED_SERVERS_WITH_TABLES="$services" \
        KINDRED_EXTRA_SCHEMAS="$(extra_schemas_of "$services")" \
        services/postgres/init-roles.sh >>"${PG_LOGS[$i]}" 2>&1 9>&- || startup_failed "creating roles failed" "${PG_LOGS[$i]}"
}
# --standby: a streaming standby of the server holding profile's schema, for profile's reads that may be slightly
# stale (KINDRED_PROFILE_READ_DATABASE_URL; services/profile/README.md lists them). Made afresh on every start (a
# standby is disposable) with pg_basebackup -R over the primary's unix socket: no TCP, so trust authentication
# stays behind the private socket folder. It streams from the primary and, when it fell behind further than the
# primary's pg_wal reaches, restores segments from the primary's WAL archive. Read-only (hot standby).
STANDBY_PORT=5440
postgres_standby() {
    local number primary index data="$CLUSTER_DIR/postgres-standby-data" archive settings
    number="$(pg_server_of profile)" || fail "--standby: no database server holds profile's schema"
    primary=$((number - 1))
    rm -rf "$data"
    postgres_places postgres-standby "$data" "$STANDBY_PORT"
    index=$((${#PG_NAMES[@]} - 1))
    as_postgres "$PG_BIN/pg_basebackup" -D "$data" -R -X stream -c fast -h "${PG_SOCKETS[$primary]}" \
        -p "${PG_PORTS[$primary]}" -U postgres >>"${PG_LOGS[$index]}" 2>&1 9>&- \
        || startup_failed "pg_basebackup of the standby failed" "${PG_LOGS[$index]}"
    # A hot standby needs at least its primary's max_connections.
    settings=("hot_standby = on" "hot_standby_feedback = on" "archive_mode = off"
        "max_connections = $(max_connections_for "${DB_GROUPS[$primary]}")")
    archive="$(pg_server_archive "$WAL_ARCHIVE" "$number")"
    [ "$archive" = off ] || settings+=("restore_command = '$(wal_restore_command "$archive")'")
    postgres_conf "$index" "${settings[@]}"
    postgres_start "$index"
    STANDBY_INDEX=$index
    say "Started the standby of ${PG_NAMES[$primary]} (pid $(head -n 1 "$data/postmaster.pid")) for profile's stale-tolerant reads"
}
for index in "${!DB_GROUPS[@]}"; do postgres_server "$index"; done
# A data folder of a layout with more servers than this one: its services' tables would be missed.
for extra in "$DATA_DIR"/postgres-*/kindred-services; do
    [ -f "$extra" ] || continue
    number="$(basename "$(dirname "$extra")")"
    ((${number#postgres-} <= ${#DB_GROUPS[@]})) \
        || fail "$(dirname "$extra") holds the schemas of $(cat "$extra"), which this layout puts elsewhere: start with the layout it was made with (KINDRED_DATABASES)"
done
if [ -n "$STANDBY" ]; then postgres_standby; fi

# ---------------------------------------------------------------------------------------------------------
# Per-server settings. A new server needs its name in services/cluster.env (and in KINDRED_SERVERS_WITH_TABLES
# when it has migrations); a server_env_<name> function only for settings beyond the common ones.
urlencode_path() { # libpq URL query value: keep [A-Za-z0-9/._-], percent-encode the rest
    local LC_ALL=C path="$1" out="" c i
    for ((i = 0; i < ${#path}; i++)); do
        c="${path:i:1}"
        case "$c" in [A-Za-z0-9/._-]) out+="$c" ;; *) out+="$(printf '%%%02X' "'$c")" ;; esac
    done
    printf '%s\n' "$out"
}
# URL of server INDEX (0-based) for ROLE; the first server's keeps libpq's default port, as before several servers.
server_url() { # server_url INDEX ROLE
    local port=""
    [ "${PG_PORTS[$1]}" = 5432 ] || port="&port=${PG_PORTS[$1]}"
    echo "postgresql://$2@/$KINDRED_DATABASE?host=$(urlencode_path "${PG_SOCKETS[$1]}")$port"
}
database_url() { server_url "$(($(pg_server_of "$1") - 1))" "kindred_$1"; }
secret() { # one random secret per data folder and name, kept in $DATA_DIR/secrets/<name> (mode 0600)
    local file="$DATA_DIR/secrets/$1"
    if [ ! -s "$file" ]; then
        mkdir -p "$DATA_DIR/secrets" && chmod 0700 "$DATA_DIR/secrets"
        (umask 077 && openssl rand -hex 32 >"$file")
    fi
    cat "$file"
}
# What every server gets, by the naming convention KINDRED_<NAME>_*: its listen and admin addresses, and
# when it has tables its database URL (as its own role), migrations folder and data folder.
server_env_common() {
    local name="${1%%.*}" prefix
    prefix="KINDRED_${name^^}"
    SERVER_ENV=(
        "${prefix}_LISTEN=127.0.0.1:$(port_of "$1")"
        "${prefix}_ADMIN_LISTEN=127.0.0.1:$(port_of "$1" admin)"
    )
    [ -z "$NATS_URL" ] || SERVER_ENV+=("KINDRED_EVENTS_NATS_URL=$NATS_URL")
    if has_tables "$name"; then
        SERVER_ENV+=(
            "${prefix}_DATABASE_URL=$(database_url "$name")"
            "${prefix}_MIGRATIONS_DIR=$ROOT/services/$name/migrations"
            "${prefix}_DATA_DIR=$DATA_DIR/$name"
        )
    fi
}
# The consumers of a producer's events (cluster.env KINDRED_EVENT_CONSUMERS_OF_<NAME>) as name=host:port,...
# (a consumer's replicas as name=host:port|host:port)
event_consumers() {
    local variable="KINDRED_EVENT_CONSUMERS_OF_${1^^}" consumer list=""
    for consumer in ${!variable:-}; do
        list+="${list:+,}$consumer=$(addresses_of "$consumer" "|")"
        # Every discovery shard applies every event, under a consumer name of its own.
        if [ "$consumer" = discovery ]; then
            for shard in $(discovery_shard_names); do list+=",$shard=127.0.0.1:$(port_of "$shard")"; done
        fi
    done
    echo "$list"
}
# Settings of one server beyond the common ones; a server without a function here gets only those.
server_env_auth() {
    SERVER_ENV+=(
        KINDRED_AUTH_EVENT_CONSUMERS="$(event_consumers auth)"
        KINDRED_AUTH_SMTP_HOST=127.0.0.1
        KINDRED_AUTH_SMTP_PORT="$SMTP_PORT"
        KINDRED_AUTH_SMTP_SECURITY=none
        KINDRED_AUTH_SERVICE_SECRET_GATEWAY="$(secret gateway)"
    )
    local name
    for name in $KINDRED_SERVERS; do # every other service's secret (a service not running yet uses it later)
        case "$name" in auth | gateway) ;; *) SERVER_ENV+=("KINDRED_AUTH_SERVICE_SECRET_${name^^}=$(secret "$name")") ;; esac
    done
}
# The gateway's media port (signed photo URLs, plain HTTP GET): the port base + 200.
media_port() { # media_port [INSTANCE]: replica r >= 2 of the gateway has base + 205 + r
    local replica=1
    [[ "${1:-}" == *.* ]] && replica="${1#*.}"
    if ((replica == 1)); then echo $((PORT_BASE + 200)); else echo $((PORT_BASE + 205 + replica)); fi
}
server_env_profile() {
    SERVER_ENV+=(
        KINDRED_MEDIA_URL_KEY="$(secret media-url)"
        KINDRED_PROFILE_MEDIA_BASE_URL="http://127.0.0.1:$(media_port)"
        KINDRED_PROFILE_EVENT_CONSUMERS="$(event_consumers profile)"
        KINDRED_PROFILE_AUTH_ADDRESS="$(addresses_of auth)"
        KINDRED_PROFILE_DISCOVERY_ADDRESS="$(addresses_of discovery)"
        KINDRED_PROFILE_SERVICE_SECRET="$(secret profile)"
        KINDRED_LOCATION_KEY="$(secret location)"
    )
    discovery_shards_env profile
}
server_env_discovery() {
    SERVER_ENV+=(
        KINDRED_DISCOVERY_AUTH_ADDRESS="$(addresses_of auth)"
        KINDRED_DISCOVERY_PROFILE_ADDRESS="$(addresses_of profile)"
        KINDRED_DISCOVERY_SERVICE_SECRET="$(secret discovery)"
        KINDRED_LOCATION_KEY="$(secret location)"
    )
    discovery_shard_setting 0
}
server_env_match() {
    SERVER_ENV+=(
        KINDRED_MATCH_AUTH_ADDRESS="$(addresses_of auth)"
        KINDRED_MATCH_DISCOVERY_ADDRESS="$(addresses_of discovery)"
        KINDRED_MATCH_SERVICE_SECRET="$(secret match)"
        # Set (even empty, e.g. by the swipe benchmark) in the environment: taken as it is.
        KINDRED_MATCH_EVENT_CONSUMERS="${KINDRED_MATCH_EVENT_CONSUMERS-$(event_consumers match)}"
        KINDRED_MATCH_PAGE_TOKEN_SECRET="$(secret match-page-token)"
    )
    discovery_shards_env match
}
server_env_chat() {
    SERVER_ENV+=(KINDRED_CHAT_SERVICE_SECRET="$(secret chat)" KINDRED_CHAT_AUTH_ADDRESS="$(addresses_of auth)"
        KINDRED_CHAT_EVENT_CONSUMERS="$(event_consumers chat)")
}
server_env_notify() {
    SERVER_ENV+=(KINDRED_NOTIFY_SERVICE_SECRET="$(secret notify)" KINDRED_NOTIFY_AUTH_ADDRESS="$(addresses_of auth)"
        KINDRED_NOTIFY_CHAT_ADDRESS="$(addresses_of chat)" KINDRED_NOTIFY_PROFILE_ADDRESS="$(addresses_of profile)")
    # The key webhook signing secrets are sealed with at rest: one per data folder, like the other secrets.
    SERVER_ENV+=(KINDRED_NOTIFY_WEBHOOK_KEY="$(secret notify-webhook-key)")
    push_peers_env
    webhook_development_env
}
# Development: webhook endpoints may be local receivers (loopback, http://); compose's deployments refuse them.
webhook_development_env() {
    SERVER_ENV+=(KINDRED_NOTIFY_WEBHOOK_ALLOW_PRIVATE_HOSTS=true)
}
# Notify's settings for the push peers this run starts (compose has no such peers).
push_peers_env() {
    if has_peer apns; then
        SERVER_ENV+=(KINDRED_NOTIFY_APNS_BASE_URL="https://127.0.0.1:$(peer_port apns)"
            KINDRED_NOTIFY_APNS_KEY_FILE="$PUSH_DIR/apns-key.p8" KINDRED_NOTIFY_APNS_KEY_ID="$APNS_PEER_KEY_ID"
            KINDRED_NOTIFY_APNS_TEAM_ID="$APNS_PEER_TEAM_ID" KINDRED_NOTIFY_APNS_TOPIC="$APNS_PEER_TOPIC"
            KINDRED_NOTIFY_APNS_CA_FILE="$PUSH_DIR/ca.pem")
    fi
    if has_peer fcm; then
        SERVER_ENV+=(KINDRED_NOTIFY_FCM_SERVICE_ACCOUNT_FILE="$PUSH_DIR/fcm-service-account.json"
            KINDRED_NOTIFY_FCM_BASE_URL="https://127.0.0.1:$(peer_port fcm)" KINDRED_NOTIFY_FCM_CA_FILE="$PUSH_DIR/ca.pem")
    fi
    if has_peer webpush; then
        SERVER_ENV+=(KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE="$PUSH_DIR/vapid-key.pem"
            KINDRED_NOTIFY_WEB_PUSH_SUBJECT="mailto:dev@localhost" KINDRED_NOTIFY_WEB_PUSH_CA_FILE="$PUSH_DIR/ca.pem"
            KINDRED_NOTIFY_WEB_PUSH_HOSTS="localhost")
    fi
}
APNS_PEER_KEY_ID=KINDREDDEV
APNS_PEER_TEAM_ID=KINDREDDEV
APNS_PEER_TOPIC=dev.kindred.app
FCM_PEER_PROJECT=kindred-dev
server_env_gateway() {
    local name
    SERVER_ENV+=(KINDRED_GATEWAY_SERVICE_SECRET="$(secret gateway)")
    SERVER_ENV+=(KINDRED_MEDIA_URL_KEY="$(secret media-url)" KINDRED_GATEWAY_MEDIA_LISTEN="127.0.0.1:$(media_port "$INSTANCE")")
    # The web app (web/) on the media port under /app/, calling the API cross-origin (another port).
    SERVER_ENV+=(KINDRED_GATEWAY_WEB_ROOT="$ROOT/web"
        KINDRED_GATEWAY_CORS_ORIGINS="${KINDRED_GATEWAY_CORS_ORIGINS:-http://127.0.0.1:$(media_port),http://localhost:$(media_port)}")
    for name in "${RUNNING_ORDER[@]}"; do # every service this cluster runs, e.g. KINDRED_GATEWAY_AUTH_ADDRESS
        [ "$name" = gateway ] || SERVER_ENV+=("KINDRED_GATEWAY_${name^^}_ADDRESS=$(addresses_of "$name")")
    done
    discovery_shards_env gateway
}
server_env() { # server_env INSTANCE -> SERVER_ENV (INSTANCE: a service, or its replica <service>.<r>)
    case "$1" in discovery_[0-9]*) server_env_discovery_shard "$1"; return ;; esac
    INSTANCE="$1"
    server_env_common "$1"
    if declare -F "server_env_${1%%.*}" >/dev/null; then "server_env_${1%%.*}"; fi
    standby_env "${1%%.*}"
}
# Profile's card reads on the standby (--standby; compose runs no standby).
standby_env() {
    if [ "$1" = profile ] && [ -n "${STANDBY_INDEX:-}" ]; then
        SERVER_ENV+=("KINDRED_PROFILE_READ_DATABASE_URL=$(server_url "$STANDBY_INDEX" kindred_profile)")
    fi
}

# ---------------------------------------------------------------------------------------------------------
# Migrations, each as its service's role, from the checkout (cwd = the repository).
# The JetStream cluster (--nats), stopped with the peers after the servers; with KINDRED_ON_SERVER_EXIT=restart a
# node that dies is started again on its store (fault tests).
start_nats_node() { # start_nats_node NODE -> NATS_PID
    local node="$1" other routes=""
    for other in 0 1 2; do [ "$other" = "$node" ] || routes+="${routes:+,}nats://127.0.0.1:$(nats_route_port "$other")"; done
    mkdir -p "$DATA_DIR/nats/n$node"
    setsid "$(command -v nats-server || echo /usr/sbin/nats-server)" -a 127.0.0.1 -p "$(nats_port "$node")" -n "n$node" \
        -js -sd "$DATA_DIR/nats/n$node" --cluster_name kindred --cluster "nats://127.0.0.1:$(nats_route_port "$node")" \
        --routes "$routes" >>"$LOG_DIR/nats-$node.log" 2>&1 9>&- </dev/null &
    NATS_PID=$!
}
start_nats() {
    local node
    for node in 0 1 2; do
        start_nats_node "$node"
        PEER_PIDS+=("nats-$node $NATS_PID")
        record_pid "nats-$node" "$NATS_PID"
    done
    for node in 0 1 2; do
        wait_until port_taken "$(nats_port "$node")" || startup_failed "nats-$node did not start" "$LOG_DIR/nats-$node.log"
    done
    say "Started NATS JetStream (three nodes): $NATS_URL"
}
restart_nats() { # restart_nats NAME OLD_PID
    local name="$1" old="$2" i
    start_nats_node "${name#nats-}"
    for i in "${!PEER_PIDS[@]}"; do
        if [ "${PEER_PIDS[$i]}" = "$name $old" ]; then PEER_PIDS[i]="$name $NATS_PID"; fi
    done
    sed -i "s/^$name $old\$/$name $NATS_PID/" "$PIDS"
    say "run-cluster: restarted $name (pid $NATS_PID)" >&2
}

for name in "${RUNNING_ORDER[@]}"; do
    server_env "$name"
    log="$LOG_DIR/$name-migrate.log"
    env "${SERVER_ENV[@]}" "$BIN/$name-server" migrate >"$log" 2>&1 9>&- \
        || startup_failed "$name-server migrate failed" "$log"
    has_tables "$name" && say "Migrated $name (schema $name, role kindred_$name)."
done
# The preset communities (dating, bizmatch, playdates, fitness); existing ones are kept.
if [[ " ${RUNNING_ORDER[*]} " == *" profile "* ]]; then
    server_env profile
    env "${SERVER_ENV[@]}" "$BIN/profile-server" communities install >"$LOG_DIR/profile-communities.log" 2>&1 9>&- \
        || startup_failed "profile-server communities install failed" "$LOG_DIR/profile-communities.log"
fi

# The SMTP sink, in its own session like the servers: Ctrl-C reaches only this script, which stops
# everything in order.
setsid python3 services/smtp-sink/smtp_sink.py "$MAIL_DIR" --host 127.0.0.1 --port "$SMTP_PORT" \
    >"$LOG_DIR/smtp-sink.log" 2>&1 9>&- </dev/null &
SINK_PID=$!
record_pid smtp-sink "$SINK_PID"
WAIT_PID=$SINK_PID wait_until grep -q '^LISTENING' "$LOG_DIR/smtp-sink.log" \
    || startup_failed "the SMTP sink did not start" "$LOG_DIR/smtp-sink.log"

# The push peers, with throwaway keys made for this run; all started, then each waited for.
if [ ${#PEERS[@]} -gt 0 ]; then
    FCM_TOKEN_URI="https://127.0.0.1:$(peer_port fcm)/token"
    python3 Tests/Peers/push_test_keys.py "$PUSH_DIR" --token-uri "$FCM_TOKEN_URI" --project "$FCM_PEER_PROJECT" \
        >/dev/null 9>&- || fail "could not make the push peers' keys"
fi
for peer in "${PEERS[@]}"; do
    case "$peer" in
        apns) arguments=(--public-key "$PUSH_DIR/apns-key.pub.pem" --key-id "$APNS_PEER_KEY_ID"
            --team-id "$APNS_PEER_TEAM_ID" --topic "$APNS_PEER_TOPIC") ;;
        fcm) arguments=(--public-key "$PUSH_DIR/fcm-service-account.pub.pem" --token-uri "$FCM_TOKEN_URI"
            --client-email "push@$FCM_PEER_PROJECT.iam.gserviceaccount.com" --project "$FCM_PEER_PROJECT") ;;
        webpush) arguments=(--vapid-public-key "$PUSH_DIR/vapid-key.pub.pem") ;;
    esac
    setsid python3 "Tests/Peers/${peer}_peer.py" --port "$(peer_port "$peer")" --cert "$PUSH_DIR/server.pem" \
        --key "$PUSH_DIR/server-key.pem" --record "$LOG_DIR/$peer-peer.jsonl" "${arguments[@]}" \
        >"$LOG_DIR/$peer-peer.log" 2>&1 9>&- </dev/null &
    PEER_PIDS+=("$peer-peer $!")
    record_pid "$peer-peer" "$!"
done
for entry in "${PEER_PIDS[@]}"; do
    read -r name pid <<<"$entry"
    WAIT_PID=$pid wait_until grep -q '^LISTENING' "$LOG_DIR/$name.log" \
        || startup_failed "the push peer $name did not start" "$LOG_DIR/$name.log"
    case "$name" in
        apns-peer) say "Started the APNs peer (pid $pid): https://127.0.0.1:$(peer_port apns), topic $APNS_PEER_TOPIC" ;;
        fcm-peer) say "Started the FCM peer (pid $pid): https://127.0.0.1:$(peer_port fcm), project $FCM_PEER_PROJECT" ;;
        webpush-peer) say "Started the Web Push peer (pid $pid): https://localhost:$(peer_port webpush)/subscribe" ;;
    esac
done
[ -z "$NATS" ] || start_nats

for name in $(for service in "${RUNNING_ORDER[@]}"; do instances_of "$service"; done); do
    server_env "$name"
    env "${SERVER_ENV[@]}" setsid "$BIN/${name%%.*}-server" serve >"$LOG_DIR/$name.log" 2>&1 9>&- </dev/null &
    pid=$!
    SERVER_PIDS+=("$name $pid")
    record_pid "$name" "$pid"
    waited=0
    WAIT_PID=$pid wait_until env "${SERVER_ENV[@]}" "$BIN/${name%%.*}-server" healthcheck 9>&- || waited=$?
    case $waited in
        0) ;;
        2) startup_failed "$name-server failed to start (it exited)" "$LOG_DIR/$name.log" ;;
        *) startup_failed "$name-server did not report SERVING within ${START_TIMEOUT} s" "$LOG_DIR/$name.log" ;;
    esac
    say "Started $name (pid $pid): gRPC 127.0.0.1:$(port_of "$name"), metrics http://127.0.0.1:$(port_of "$name" admin)/metrics"
done

start_discovery_shards

# ---------------------------------------------------------------------------------------------------------
database_summary() { # a psql command per server (and the standby), for the summary below
    local i
    for i in "${!PG_NAMES[@]}"; do
        printf '  db:    %s "%s"' "$PG_BIN/psql" "$(server_url "$i" postgres)"
        if [ "${PG_NAMES[$i]}" = postgres-standby ]; then
            printf '   (standby)\n'
        elif [ ${#DB_GROUPS[@]} -gt 1 ]; then
            printf '   (%s)\n' "${DB_GROUPS[$i]}"
        else
            printf '\n'
        fi
    done
}
push_summary() { # where notifications land, for the summary below
    local peer files=()
    for peer in "${PEERS[@]}"; do files+=("$LOG_DIR/$peer-peer.jsonl"); done
    if [ ${#files[@]} -gt 0 ]; then
        printf '%s (each push a local peer received, checked; Web Push decrypted)' "${files[*]}"
    else
        printf 'no local push peers (--no-push-peers or providers set in the environment)'
    fi
}
if [[ " ${RUNNING_ORDER[*]} " == *" gateway "* ]]; then
    say "Kindred is up: gateway at 127.0.0.1:$(port_of gateway)"
    (($(replicas_of gateway) == 1)) || say "  gateway replicas: $(addresses_of gateway)"
    say "  web app: http://127.0.0.1:$(media_port)/app/ (open it in a browser)"
else
    say "Kindred is up without a gateway: auth at 127.0.0.1:$(port_of auth)"
fi
cat <<EOF
  logs:  $LOG_DIR/<server>.log (postgres.log, smtp-sink.log)
  mail:  $MAIL_DIR (one .eml per mail; smtp-sink.log shows each mail's code)
  push:  $(push_summary)
  pids:  $PIDS
$(database_summary)
  try:   export PATH="$BIN:\$PATH" KINDRED_GATEWAY=127.0.0.1:$(port_of gateway)
         kindred signup --email you@example.com --username you     # asks for a password; mails a code
         grep code= $LOG_DIR/smtp-sink.log
         kindred verify --email you@example.com --code <code> && kindred signin you && kindred whoami
Ctrl-C stops the cluster.
EOF

# ---------------------------------------------------------------------------------------------------------
# KINDRED_ON_SERVER_EXIT=restart (the fault test, Tests/Cluster/test_faults.py): a server that exits, even by
# SIGKILL, is started again with the same settings, and so is PostgreSQL (crash recovery); the pids file and
# the shutdown list follow the new pids. A server is not waited for here: one that exits again is restarted
# again on the next round, a second later.
restart_server() { # restart_server NAME OLD_PID
    local name="$1" old="$2" pid i
    sleep 0.2 9>&-
    server_env "$name"
    env "${SERVER_ENV[@]}" setsid "$BIN/${name%%[._][0-9]*}-server" serve >>"$LOG_DIR/$name.log" 2>&1 9>&- </dev/null &
    pid=$!
    for i in "${!SERVER_PIDS[@]}"; do
        if [ "${SERVER_PIDS[$i]}" = "$name $old" ]; then SERVER_PIDS[i]="$name $pid"; fi
    done
    sed -i "s/^$name $old\$/$name $pid/" "$PIDS"
    unset "EXITED[$name]"
    say "run-cluster: restarted $name (pid $pid)" >&2
}
restart_postgres() { # restart_postgres INDEX OLD_PID: after a crash its children may linger a moment, so pg_ctl start is retried
    local deadline=$((SECONDS + START_TIMEOUT)) name="${PG_NAMES[$1]}" data="${PG_DATAS[$1]}" log="${PG_LOGS[$1]}"
    # shellcheck disable=SC2094 # pg_ctl appends to the log itself, as its own messages do
    until as_postgres "$PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t "$START_TIMEOUT" start >>"$log" 2>&1 9>&-; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.5 9>&-
    done
    sed -i "s/^$name $2\$/$name $(head -n 1 "$data/postmaster.pid")/" "$PIDS"
    say "run-cluster: restarted $name (pid $(head -n 1 "$data/postmaster.pid"))" >&2
}

# ---------------------------------------------------------------------------------------------------------
# --demo: the seed, as a client of the gateway like any other (its own, empty session folder: no admin is
# signed in, so the preset communities installed above must exist, which the seed checks).
if [ -n "$DEMO" ]; then
    say "Seeding the demo: kindred admin seed --seed $DEMO_SEED --members $DEMO_MEMBERS ..."
    if KINDRED_CONFIG_DIR="$CLUSTER_DIR/demo-seed" "$BIN/kindred" admin seed --gateway "127.0.0.1:$(port_of gateway)" \
        --seed "$DEMO_SEED" --members "$DEMO_MEMBERS" --mail-log "$LOG_DIR/smtp-sink.log" --timeout 60 9>&- </dev/null; then
        say "In a browser: http://127.0.0.1:$(media_port)/app/ (sign in as demo-$DEMO_SEED-0@example.com," \
            "password kindred-demo-$DEMO_SEED-password, or create an account)"
        say "Demo ready."
    else
        say "run-cluster: the demo seed failed (the cluster keeps running); run it again with:" >&2
        say "  kindred admin seed --seed $DEMO_SEED --members $DEMO_MEMBERS --mail-log $LOG_DIR/smtp-sink.log" >&2
    fi
fi

# Watch. A server that exits on its own stops the cluster (exit 1), unless KINDRED_ON_SERVER_EXIT=keep: then the
# others keep running (tests stop one server on purpose). A push peer, the sink or PostgreSQL dying always stops it,
# and so does the process KINDRED_STOP_WITH_PID names going away (exit 0).
while true; do
    if [ -n "$STOP_WITH_PID" ] && ! alive "$STOP_WITH_PID"; then
        exec >>"$LOG_DIR/run-cluster.log" 2>&1 # whoever read the output may be gone with it
        say "run-cluster: process $STOP_WITH_PID (KINDRED_STOP_WITH_PID) is gone; stopping the cluster"
        stop_all 0
    fi
    for entry in "${SERVER_PIDS[@]}"; do
        read -r name pid <<<"$entry"
        if [ -n "${EXITED[$name]:-}" ] || alive "$pid"; then continue; fi
        code=0
        wait "$pid" || code=$?
        EXITED[$name]=$code
        say "run-cluster: $name (pid $pid) exited on its own with status $code; last lines of $LOG_DIR/$name.log:" >&2
        tail -n 20 "$LOG_DIR/$name.log" 2>/dev/null | sed 's/^/    /' >&2
        if [ "$ON_SERVER_EXIT" = restart ]; then restart_server "$name" "$pid" && continue; fi
        [ "$ON_SERVER_EXIT" = keep ] || stop_all 1
        say "run-cluster: the other servers keep running (KINDRED_ON_SERVER_EXIT=keep)" >&2
    done
    for entry in "${PEER_PIDS[@]}" "smtp-sink $SINK_PID"; do
        read -r name pid <<<"$entry"
        if ! alive "$pid"; then
            say "run-cluster: $name (pid $pid) exited unexpectedly; last lines of its log:" >&2
            tail -n 20 "$LOG_DIR/$name.log" 2>/dev/null | sed 's/^/    /' >&2
            if [ "$ON_SERVER_EXIT" = restart ] && [[ "$name" == nats-* ]] && restart_nats "$name" "$pid"; then continue; fi
            stop_all 1
        fi
    done
    for i in "${!PG_NAMES[@]}"; do
        { read -r pid <"${PG_DATAS[$i]}/postmaster.pid"; } 2>/dev/null || pid=0
        if ! alive "$pid"; then
            say "run-cluster: ${PG_NAMES[$i]} (pid $pid) exited unexpectedly; last lines of its log:" >&2
            tail -n 20 "${PG_LOGS[$i]}" 2>/dev/null | sed 's/^/    /' >&2
            if [ "$ON_SERVER_EXIT" = restart ] && restart_postgres "$i" "$pid"; then continue; fi
            stop_all 1
        fi
    done
    sleep 1 9>&- &
    wait $! || true
done
