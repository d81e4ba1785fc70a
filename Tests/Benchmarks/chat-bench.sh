#!/usr/bin/env bash
# Benchmarks the chat service on a release cluster (services/run-cluster.sh with its private PostgreSQL,
# synchronous_commit=on) with the kindred-chat-bench driver:
#   1. latency: 1,000 connected subscribers, 1,000 messages/s between matched pairs, send -> arrival on the
#      recipient's Subscribe stream (p50/p90/p99/max);
#   2. throughput: concurrent senders as fast as chat acknowledges (each message durably committed);
#   3. memory: chat-server's resident memory per idle subscriber.
# The servers first plan their statements on empty tables, and PostgreSQL keeps a cached plan until the table's
# statistics change (autovacuum gathers them after a running cluster's first minute): an ANALYZE 3 s after the latency
# and the throughput runs start gives them statistics of tables their setup has begun to fill.
# Usage: Tests/Benchmarks/chat-bench.sh [seconds per run (default 20)] [subscribers (1000)] [rate (1000)]
# Settings: KINDRED_BIN_DIR (ready release binaries with kindred-chat-bench: no build).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh
SECONDS_PER_RUN=${1:-20}
USERS=${2:-1000}
RATE=${3:-1000}

release_binaries chat-server auth-server gateway-server kindred-chat-bench
BIN="$KINDRED_BIN_DIR"
WORK="$(mktemp -d /tmp/kindred-chat-bench.XXXXXX)"
chmod 755 "$WORK"
BASE="$(free_port_base)"
LOG="$WORK/run-cluster.log"
KINDRED_BIN_DIR="$BIN" KINDRED_DATA_DIR="$WORK/data" KINDRED_CLUSTER_DIR="$WORK/run" KINDRED_PORT_BASE=$BASE \
    KINDRED_SMTP_PORT=$((BASE + 150)) KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT=10000 KINDRED_LOG_LEVEL=warning \
    KINDRED_CHAT_ACCESS_LOG=false KINDRED_CHAT_DATABASE_POOL_SIZE=20 \
    setsid services/run-cluster.sh >"$LOG" 2>&1 </dev/null &
CLUSTER=$!
cleanup() { kill -TERM "$CLUSTER" 2>/dev/null || true; # TERM: a background job ignores INT (bash), so run-cluster.sh never saw it
    wait "$CLUSTER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
wait_for_cluster "$LOG" "$CLUSTER"
CHAT="127.0.0.1:$((BASE + 5))"
CHAT_PID=$(awk '$1 == "chat" {print $2}' "$WORK/run/pids")
KEY="$WORK/data/auth/signing-key.pem"
echo "chat-server $CHAT (pid $CHAT_PID), release build ($BIN), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
cluster_sql "$LOG"
analyze_soon() { (sleep 3; sql -c "ANALYZE" >/dev/null 2>&1) & }

"$BIN/kindred-chat-bench" --mode memory --chat "$CHAT" --signing-key "$KEY" --users "$USERS" --chat-pid "$CHAT_PID"
analyze_soon
"$BIN/kindred-chat-bench" --mode latency --chat "$CHAT" --signing-key "$KEY" --users "$USERS" --rate "$RATE" \
    --duration "$SECONDS_PER_RUN"
# The tables read most by sequential scans during the setup and the latency run: a plan that reads a whole table
# per message shows here.
sql -c "SELECT schemaname || '.' || relname AS table, seq_scan, seq_tup_read, idx_scan FROM pg_stat_user_tables
    ORDER BY seq_tup_read DESC LIMIT 6" || true
analyze_soon
"$BIN/kindred-chat-bench" --mode throughput --chat "$CHAT" --signing-key "$KEY" --users 128 --senders 64 \
    --duration "$SECONDS_PER_RUN"
