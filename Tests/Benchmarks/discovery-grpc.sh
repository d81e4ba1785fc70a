#!/usr/bin/env bash
# GetDeck through gRPC at scale (issue 12): decks per second, latency percentiles and the server's CPU per deck,
# driving a release discovery-server directly, as the gateway does (its service token and viewer_user_id).
#
#   1. generates a population (kindred-discovery-pg-bench generate: N members in 400 cities of Zipf-like sizes,
#      S swipes each with ranking features, so the rebuild replays the models: memory is with models on; the same
#      generator as the PostgreSQL benchmark) as COPY files;
#   2. starts a cluster of PostgreSQL, auth and discovery only (services/run-cluster.sh over a folder holding just
#      those two servers; free ports, a temporary data folder);
#   3. COPYs the population into discovery's tables (psql \copy as in kindred-discovery-pg-bench), ANALYZE;
#   4. `kindred-load deck --rebuild`: RebuildIndex (the rebuild the server runs at start), then first deck pages for
#      random viewers among all N members (distinct viewers: one viewer's deck would stay in cache) with C calls in
#      flight over K connections for D seconds; decks/s, p50/p90/p99, the CPU of discovery and of the driver (it
#      shares the cores) and discovery's CPU per deck;
#   5. h2load with one viewer's request body (every call the same viewer: cache-hot, for comparison), with the
#      server's CPU per call.
# Access logs off, the per-viewer budget lifted (a benchmark's viewers all call many times); pool and scan limit
# are the service's (KINDRED_DISCOVERY_DECK_POOL / _SCAN_LIMIT in the environment pass through). Resident memory of
# discovery is printed after the rebuild and at the end.
#
# Discovery as geographic shards (the sixth argument, 1 to 6; services/discovery/README.md, "Shards"): run-cluster's
# --discovery-shards=N starts shard 0 as discovery and shard i as discovery_i (KINDRED_DISCOVERY_SHARDS=i/N, its own
# projection schema discovery_i); the population is COPYed into every shard's projection and every shard rebuilds
# its index from it; `kindred-load deck` is given every shard's address and routes each viewer as the gateway does
# (DiscoveryShardRouter: WRONG_SHARD redirects followed and the owner remembered; every viewer is called once
# before the warm-up so the measured window runs with every owner known); CPU per deck adds every shard's; h2load
# calls the shard that serves its one viewer. Here every shard shares the same cores.
#
# Usage: Tests/Benchmarks/discovery-grpc.sh [members (default 1000000)] [swipes each (10)] [seconds (20)]
#            [concurrency (32)] [connections (2)] [discovery shards (1)]
# Settings: KINDRED_BENCH_VIEWERS=n: the decks are for n members drawn at random (the same n for every shard count;
# default: every member; with shards every viewer is called once first, so keep n to a few ten thousand);
# KINDRED_BIN_DIR (ready release binaries: no build); KINDRED_BENCH_POPULATION: a folder to keep the
# generated population in and reuse (generating 5M members takes minutes; same members and swipes arguments); KINDRED_BENCH_PERF=1: `perf record -g` of discovery
# for 10 s of the many-viewer run, its top symbols printed (or written to KINDRED_BENCH_PERF_OUT; the recording kept
# as KINDRED_BENCH_PERF_DATA when set).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh
MEMBERS=${1:-1000000}
SWIPES=${2:-10}
SECONDS_OF_LOAD=${3:-20}
CONCURRENCY=${4:-32}
CONNECTIONS=${5:-2}
SHARDS=${6:-1}
[[ "$SHARDS" =~ ^[1-6]$ ]] || { echo "discovery shards: 1 to 6" >&2; exit 2; }

release_binaries auth-server discovery-server kindred-load kindred-discovery-pg-bench
BIN="$(cd "$KINDRED_BIN_DIR" && pwd)"
LOAD="$BIN/kindred-load"

WORK="$(mktemp -d /tmp/kindred-deck-bench.XXXXXX)"
chmod 755 "$WORK"
mkdir -p "$WORK/bin" "$WORK/population"
chmod 755 "$WORK/population"
ln -s "$BIN/auth-server" "$BIN/discovery-server" "$WORK/bin/"
free() { ! (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# run-cluster's order without a gateway: auth base+1, discovery base+3 (cluster.env's KINDRED_SERVERS positions),
# discovery shard i base+20+i (admin base+120+i).
shard_ports_free() { local i; for ((i = 1; i < SHARDS; i++)); do free $((BASE + 20 + i)) && free $((BASE + 120 + i)) || return 1; done; }
BASE=48050
while ! { free $((BASE + 1)) && free $((BASE + 3)) && free $((BASE + 101)) && free $((BASE + 103)) \
    && free $((BASE + 150)) && shard_ports_free; }; do BASE=$((BASE + 10)); done

echo "discovery through gRPC: $MEMBERS members, $SWIPES swipes each, $SHARDS shard(s), $(nproc) cores," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
started=$SECONDS
POPULATION="$WORK/population"
if [ -n "${KINDRED_BENCH_POPULATION:-}" ]; then
    POPULATION="$KINDRED_BENCH_POPULATION"
    mkdir -p "$POPULATION"
    chmod 755 "$POPULATION"
fi
if [ ! -s "$POPULATION/viewers.txt" ] || [ "$(wc -l <"$POPULATION/viewers.txt")" != "$MEMBERS" ]; then
    "$BIN/kindred-discovery-pg-bench" generate "$MEMBERS" "$SWIPES" "$POPULATION"
fi
chmod 644 "$POPULATION"/*
VIEWERS="$POPULATION/viewers.txt"
if [ -n "${KINDRED_BENCH_VIEWERS:-}" ]; then
    VIEWERS="$WORK/viewers.txt"
    # The same sample every time (a fixed random source), so runs with different shard counts compare.
    shuf -n "$KINDRED_BENCH_VIEWERS" --random-source=<(yes) "$POPULATION/viewers.txt" >"$VIEWERS"
fi

export KINDRED_BIN_DIR="$WORK/bin" KINDRED_CLUSTER_DIR="$WORK/run" KINDRED_DATA_DIR="$WORK/data" \
    KINDRED_PORT_BASE="$BASE" KINDRED_SMTP_PORT=$((BASE + 150)) KINDRED_LOG_LEVEL=info \
    KINDRED_AUTH_ACCESS_LOG=false KINDRED_DISCOVERY_ACCESS_LOG=false \
    KINDRED_DISCOVERY_VIEWER_RATE=1000000 KINDRED_DISCOVERY_VIEWER_BURST=1000000 \
    KINDRED_DISCOVERY_REBUILD_PAGE=50000 KINDRED_DISCOVERY_SHARD_COUNT="$SHARDS"
: >"$WORK/cluster.log"
services/run-cluster.sh >"$WORK/cluster.log" 2>&1 &
CLUSTER=$!
stop() {
    kill -TERM "$CLUSTER" 2>/dev/null || true
    wait "$CLUSTER" 2>/dev/null || true
    rm -rf "$WORK"
}
trap stop EXIT
wait_for_cluster "$WORK/cluster.log" "$CLUSTER"
pid_of() { awk -v name="$1" '$1 == name { print $2 }' "$WORK/run/pids"; }
# Every shard in shard order (one shard: discovery alone), by their names in run-cluster's pids file.
SHARD_NAMES=(discovery)
for ((i = 1; i < SHARDS; i++)); do SHARD_NAMES+=("discovery_$i"); done
ADDRESSES="127.0.0.1:$(grep -o 'Started discovery (pid [0-9]*): gRPC 127.0.0.1:[0-9]*' "$WORK/cluster.log" | sed 's/.*://')"
for ((i = 1; i < SHARDS; i++)); do
    ADDRESSES+=",127.0.0.1:$(grep -o "Started discovery_$i (pid [0-9]*): shard $i of $SHARDS, gRPC 127.0.0.1:[0-9]*" \
        "$WORK/cluster.log" | sed 's/.*://')"
done
rss() { # every shard's resident memory
    local name list=""
    for name in "${SHARD_NAMES[@]}"; do
        list+="${list:+, }$(awk -v name="$name" '/VmRSS/ {printf "%s %d MiB", name, $2 / 1024}' "/proc/$(pid_of "$name")/status")"
    done
    echo "$list"
}

psql_kindred() { runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -h "$WORK/run/postgres" -d kindred "$@"; }
copying=$SECONDS
for schema in "${SHARD_NAMES[@]}"; do # each shard's projection (schema discovery_i) holds every member
    psql_kindred -c "\\copy $schema.candidates (user_id, community_id, snapshot, version) FROM '$POPULATION/candidates.tsv'"
    psql_kindred -c "\\copy $schema.swipes (viewer_id, target_id, community_id, swipe_id, liked, features, target_interests, swiped_at) FROM '$POPULATION/swipes.tsv'"
    psql_kindred -c "ANALYZE $schema.candidates; ANALYZE $schema.swipes"
done
echo "COPY + ANALYZE: $((SECONDS - copying)) s; discovery resident before the rebuild $(rss)"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
postgres_ticks() { for p in $(pgrep -u postgres postgres); do ticks "$p" 2>/dev/null || true; done | awk '{t += $1} END {print t + 0}'; }
shards_ticks() { local name; for name in "${SHARD_NAMES[@]}"; do ticks "$(pid_of "$name")"; done | awk '{t += $1} END {print t}'; }
before=$(shards_ticks); pg_before=$(postgres_ticks)
"$LOAD" deck --discovery "$ADDRESSES" --key-file "$WORK/data/auth/signing-key.pem" --viewers "$VIEWERS" \
    --rebuild --seconds 0 --h2load-dir "$WORK"
awk -v d="$(($(shards_ticks) - before))" -v all="$([ "$SHARDS" -gt 1 ] && echo " (every shard)")" -v p="$(($(postgres_ticks) - pg_before))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "rebuild CPU: discovery %.1f s%s, postgres %.1f s\n", d / hz, all, p / hz}'
echo "discovery resident after the rebuild: $(rss), load average $(cut -d' ' -f1-3 /proc/loadavg)"
# The rebuild's phases, as discovery logs them (info; access logs are off).
grep -h "index rebuilt" "$WORK/run/logs/discovery.log" | tail -1 | cut -c1-600 || true
H2LOAD_ADDRESS=$(cut -d' ' -f1 "$WORK/deck.address")
H2LOAD_SHARD=${SHARD_NAMES[$(cut -d' ' -f2 "$WORK/deck.address")]}
if [ "${KINDRED_BENCH_PERF:-}" = 1 ]; then
    (sleep 5 && perf record -e cpu-clock -g -o "$WORK/perf.data" -p "$(pid_of discovery)" -- sleep 10 >/dev/null 2>&1) &
    PERF=$!
fi
"$LOAD" deck --discovery "$ADDRESSES" --key-file "$WORK/data/auth/signing-key.pem" --viewers "$VIEWERS" \
    --concurrency "$CONCURRENCY" --connections "$CONNECTIONS" --seconds "$SECONDS_OF_LOAD" --pids-file "$WORK/run/pids"
if [ -n "${PERF:-}" ]; then
    wait "$PERF" || true
    if [ -n "${KINDRED_BENCH_PERF_DATA:-}" ]; then cp "$WORK/perf.data" "$KINDRED_BENCH_PERF_DATA"; fi
    # (head ends the pipe early: that SIGPIPE is not a failure of the benchmark)
    { perf report -i "$WORK/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null || true; } | grep "%" | head -60 | cut -c1-160 \
        >"${KINDRED_BENCH_PERF_OUT:-/dev/stdout}" || true
fi
echo "load average after the many-viewer run: $(cut -d' ' -f1-3 /proc/loadavg); discovery resident $(rss)"

# h2load: one body (one viewer), so every call is the same, cache-hot deck, on the shard that serves that viewer.
REQUESTS=$((SECONDS_OF_LOAD * 2000))
before=$(ticks "$(pid_of "$H2LOAD_SHARD")")
out=$(h2load -n "$REQUESTS" -c "$CONNECTIONS" -m $(((CONCURRENCY + CONNECTIONS - 1) / CONNECTIONS)) -d "$WORK/deck.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' -H "authorization: Bearer $(cat "$WORK/token")" \
    "http://$H2LOAD_ADDRESS/kindred.discovery.v1.DiscoveryService/GetDeck" 2>&1)
after=$(ticks "$(pid_of "$H2LOAD_SHARD")")
echo "h2load, one viewer ($H2LOAD_SHARD): $(echo "$out" | grep -E '^(finished in|requests:)' | tr '\n' ' ')"
echo "$out" | grep -E '^time for request:' || true
awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$REQUESTS" \
    'BEGIN {printf "h2load: discovery CPU per call %.0f µs\n", t / hz / n * 1e6}'
echo "total $((SECONDS - started)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
