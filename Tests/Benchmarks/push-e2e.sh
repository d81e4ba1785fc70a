#!/usr/bin/env bash
# From a message to the recipient's phone, end to end through a release cluster (services/run-cluster.sh: every
# server, private PostgreSQL with synchronous_commit=on): chat answers SendMessage, its outbox brings MessageSent to
# notify, notify's sender asks chat whether the recipient has the app open (no: no Subscribe stream) and profile for
# the sender's name, and pushes through APNsProvider to the local APNs peer (Tests/Peers/apns_peer.py with several
# processes, checking every push's provider token, headers and payload), which records when each push arrived.
# kindred-chat-bench --mode push impersonates auth and match (tokens signed with auth's key, MatchCreated delivered
# to chat) so that PAIRS matched pairs have open threads, registers an APNs device for the second member of each
# pair at notify, and sends RATE messages/s (open loop) for SECONDS, pairs in turn: a thread sees one message every
# PAIRS / RATE seconds. The script links each message (its thread and device, and when SendMessage was called) to
# the first push about that thread the peer received after that, and prints p50/p99/max of the time from the call
# to the push, and from SendMessage's answer to the push (a push can arrive before the answer does: the answer's
# way back to the driver is not part of the push's way), with notify-server's CPU time per push and its resident
# memory (the driver reads /proc). A thread's next message comes PAIRS / RATE seconds later, so a push slower than
# that would be credited to the next message; the maximum shows whether that happened.
#
# Notify holds a new message's notification KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS (3 s by default) for more messages
# of its thread, so that a burst is one push: that wait is by design and is all of the latency at the default. The
# fourth argument sets it (default 0 here: the pipeline's own latency; pass 3000 for the deployed behaviour).
# The first 2 s of messages are the warm-up (connections opened, the provider token signed) and are not counted.
#
# Where the time goes, without a clock: PostgreSQL runs with pg_stat_statements, reset when the sending starts, and
# the script prints per message sent the CPU time of every process of the pipeline (each server, PostgreSQL, the
# peer, the driver; /proc) and, per service (database role), the statements, commits, execution and planning time
# and buffers touched, then the statements that took the most time (execution and planning) with the plans made
# per call (1: planned every time; 0: a cached plan) and the buffers each call touched.
#
# Usage: Tests/Benchmarks/push-e2e.sh [seconds (20)] [messages/s (500)] [pairs (2000)] [collapse ms (0)]
# Settings: KINDRED_BIN_DIR (ready release binaries with kindred-chat-bench: no build), KINDRED_APNS_PEER_PROCESSES (2).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Tests/Benchmarks/lib/cluster.sh
SECONDS_PER_RUN=${1:-20}
RATE=${2:-500}
PAIRS=${3:-2000}
COLLAPSE_MS=${4:-0}
PROCESSES=${KINDRED_APNS_PEER_PROCESSES:-2}

release_binaries auth-server profile-server discovery-server match-server chat-server gateway-server notify-server \
    kindred-chat-bench

WORK="$(mktemp -d /tmp/kindred-push-e2e.XXXXXX)"
chmod 755 "$WORK"
BASE="$(free_port_base)"

# The APNs peer, started here so that it can have several processes; notify is pointed at it below, and
# run-cluster starts no peer of its own (--no-push-peers).
mkdir "$WORK/push"
python3 Tests/Peers/push_test_keys.py "$WORK/push" >/dev/null
python3 Tests/Peers/apns_peer.py --cert "$WORK/push/server.pem" --key "$WORK/push/server-key.pem" \
    --public-key "$WORK/push/apns-key.pub.pem" --key-id KEY1234567 --team-id TEAM123456 --topic dev.kindred.app \
    --processes "$PROCESSES" --record "$WORK/apns-peer.jsonl" >"$WORK/peer.out" 2>"$WORK/peer.err" </dev/null &
PEER=$!
trap 'kill "$PEER" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q LISTENING "$WORK/peer.out" 2>/dev/null && break; sleep 0.1; done
PEER_PORT=$(awk '/LISTENING/ {print $2}' "$WORK/peer.out")
[ -n "$PEER_PORT" ] || { cat "$WORK/peer.err"; exit 1; }

export KINDRED_CLUSTER_DIR="$WORK/run" KINDRED_DATA_DIR="$WORK/data" KINDRED_PORT_BASE="$BASE" \
    KINDRED_SMTP_PORT=$((BASE + 150)) KINDRED_LOG_LEVEL=warning \
    KINDRED_CHAT_ACCESS_LOG=false KINDRED_NOTIFY_ACCESS_LOG=false KINDRED_AUTH_ACCESS_LOG=false \
    KINDRED_PROFILE_ACCESS_LOG=false \
    KINDRED_NOTIFY_APNS_BASE_URL="https://127.0.0.1:$PEER_PORT" KINDRED_NOTIFY_APNS_KEY_FILE="$WORK/push/apns-key.p8" \
    KINDRED_NOTIFY_APNS_KEY_ID=KEY1234567 KINDRED_NOTIFY_APNS_TEAM_ID=TEAM123456 \
    KINDRED_NOTIFY_APNS_TOPIC=dev.kindred.app KINDRED_NOTIFY_APNS_CA_FILE="$WORK/push/ca.pem" \
    KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS="$COLLAPSE_MS"
export_load_limits
export KINDRED_POSTGRES_SETTINGS="shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.max = 2000
pg_stat_statements.track = top
pg_stat_statements.track_planning = on"
start_cluster "$WORK" --no-push-peers
trap 'stop_cluster; kill "$PEER" 2>/dev/null || true' EXIT
wait_for_cluster "$WORK/cluster.log" "$CLUSTER"
NOTIFY_PID=$(ss -Htlnp "( sport = :$((BASE + 6)) )" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2) || true  # its gRPC port
[ -n "$NOTIFY_PID" ] || { echo "notify-server is not running (see run-cluster's notices):"; cat "$WORK/cluster.log"; exit 1; }
echo "cluster ($KINDRED_BIN_DIR) on port base $BASE; APNs peer 127.0.0.1:$PEER_PORT ($PROCESSES processes); notify-server pid" \
    "$NOTIFY_PID, collapse window ${COLLAPSE_MS} ms; $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"

cluster_sql "$WORK/cluster.log"
sql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"

# cpu_snapshot: "name ticks" for every process of the pipeline (servers by their pids-file name, PostgreSQL's
# processes summed, the peer's processes summed, the driver).
cpu_snapshot() {
    local name pid postmaster
    ticks() { awk '{ split($0, after, ") "); split(after[2], f, " "); print f[12] + f[13] }' "/proc/$1/stat" 2>/dev/null || echo 0; }
    sum() { local total=0 p; for p in "$@"; do total=$((total + $(ticks "$p"))); done; echo "$total"; }
    while read -r name pid; do
        case "$name" in run-cluster | smtp-sink | postgres*) ;; *) echo "$name $(ticks "$pid")" ;; esac
    done <"$WORK/run/pids"
    for postmaster in $(awk '$1 ~ /^postgres/ { print $2 }' "$WORK/run/pids"); do
        echo "postgresql $(sum "$postmaster" $(pgrep -P "$postmaster"))"
    done
    echo "apns-peer $(sum "$PEER" $(pgrep -P "$PEER"))"
    echo "driver $(ticks "$DRIVER")"
}
OUT="$WORK/driver.out"
: >"$OUT"
"$KINDRED_BIN_DIR/kindred-chat-bench" --mode push --chat "127.0.0.1:$((BASE + 5))" --notify "127.0.0.1:$((BASE + 6))" \
    --signing-key "$WORK/data/auth/signing-key.pem" --users $((2 * PAIRS)) --rate "$RATE" --duration "$SECONDS_PER_RUN" \
    --notify-pid "$NOTIFY_PID" --sends "$WORK/sends.txt" --record "$WORK/apns-peer.jsonl" >"$OUT" &
DRIVER=$!
# The sending starts once the devices are registered: statistics and CPU times from there.
until [ "$(sql -tA -c "SELECT count(*) FROM notify.devices")" -ge "$PAIRS" ] || ! kill -0 "$DRIVER" 2>/dev/null; do
    sleep 0.05
done
sql -c "SELECT pg_stat_statements_reset()" >/dev/null
cpu_snapshot >"$WORK/cpu.before"
# The tables were empty when the servers' statements were first planned, and PostgreSQL keeps a cached plan until
# the table's statistics change: a cluster that has run a while has had them gathered (autovacuum), a 20 s run
# has not. One ANALYZE once the warm-up is over gives the run the plans a running cluster has (the first autovacuum
# would come after a minute).
(sleep 3; sql -c "ANALYZE" >/dev/null 2>&1) &
RECORDED_BEFORE=$(wc -l <"$WORK/apns-peer.jsonl" 2>/dev/null || echo 0)
wait "$DRIVER"
cpu_snapshot >"$WORK/cpu.after"
cat "$OUT"
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK/sends.txt" "$WORK/apns-peer.jsonl" <<'PY'
import bisect, collections, json, sys

sends = [line.split() for line in open(sys.argv[1]) if line.strip()]
pushes = collections.defaultdict(list)  # (device, thread) -> arrival times
refused = 0
for line in open(sys.argv[2]):
    entry = json.loads(line)
    if not entry.get("accepted"):
        refused += 1
        continue
    thread = str(entry["payload"].get("thread_id", "")).replace("-", "").lower()
    pushes[(entry["device"], thread)].append(entry["time"])
for times in pushes.values():
    times.sort()
first = min(float(sent) for _, _, sent, _ in sends)
latencies, after_answer, missing, covered = [], [], 0, collections.Counter()
for thread, device, sent, answered in sends:
    sent, answered = float(sent), float(answered)
    if sent < first + 2:
        continue  # warm-up
    times = pushes.get((device, thread.replace("-", "").lower()), [])
    at = bisect.bisect_left(times, sent)
    if at == len(times):
        missing += 1
        continue
    latencies.append((times[at] - sent) * 1000)
    after_answer.append(max(0.0, times[at] - answered) * 1000)
    covered[(device, thread, times[at])] += 1
total = sum(len(times) for times in pushes.values())
print(f"pushes accepted by the peer: {total} (refused {refused}); messages counted: {len(latencies) + missing}, "
      f"pushed {len(latencies)}, no push after them {missing}; messages per push {len(latencies) / max(1, len(covered)):.2f}")
for name, values in (("SendMessage called", latencies), ("SendMessage answered", after_answer)):
    values.sort()
    pick = lambda p: values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")
    print(f"{name} -> push at the APNs peer, ms: p50 {pick(0.5):.1f}  p90 {pick(0.9):.1f}  "
          f"p99 {pick(0.99):.1f}  max {values[-1] if values else float('nan'):.1f}")
PY

# Per message sent (the driver's messages, warm-up included) and per push: CPU by process, then statements,
# commits and execution time by service, then the statements that took the most time (exec_us: per message).
MESSAGES=$(wc -l <"$WORK/sends.txt")
PUSHES=$(($(wc -l <"$WORK/apns-peer.jsonl") - RECORDED_BEFORE))
echo "from the first message to the last push: $MESSAGES messages answered, $PUSHES pushes"
awk -v messages="$MESSAGES" -v pushes="$PUSHES" -v hz="$(getconf CLK_TCK)" '
    NR == FNR { before[$1] = $2; next }
    { used = ($2 - before[$1]) / hz; total += used; line[$1] = used }
    END {
        printf "CPU per message, µs:"
        for (name in line) printf " %s %.0f,", name, line[name] / messages * 1e6
        printf " all %.0f (%.1f s over the run, per push %.0f)\n", total / messages * 1e6, total, total / (pushes ? pushes : 1) * 1e6
    }' "$WORK/cpu.before" "$WORK/cpu.after"
sql -c "SELECT replace(r.rolname, 'kindred_', '') AS role,
    round(sum(s.calls)::numeric / $MESSAGES, 2) AS statements_per_message,
    round((sum(s.calls) FILTER (WHERE s.query ~* '^\s*commit'))::numeric / $MESSAGES, 2) AS commits_per_message,
    round(sum(s.total_exec_time)::numeric / $MESSAGES * 1000, 0) AS exec_us_per_message,
    round(sum(s.total_plan_time)::numeric / $MESSAGES * 1000, 0) AS plan_us_per_message,
    round(sum(s.shared_blks_hit + s.shared_blks_read)::numeric / $MESSAGES, 1) AS buffers_per_message
    FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid GROUP BY r.rolname ORDER BY 2 DESC" || true
sql -c "SELECT replace(r.rolname, 'kindred_', '') AS role, round(s.calls::numeric / $MESSAGES, 2) AS per_message,
    round(s.mean_exec_time::numeric, 3) AS mean_ms, round(s.total_exec_time::numeric / $MESSAGES * 1000, 0) AS exec_us,
    round(s.total_plan_time::numeric / $MESSAGES * 1000, 0) AS plan_us, round(s.plans::numeric / greatest(s.calls, 1), 2) AS plans,
    round((s.shared_blks_hit + s.shared_blks_read)::numeric / greatest(s.calls, 1), 1) AS buffers,
    left(regexp_replace(s.query, '\s+', ' ', 'g'), 90) AS query
    FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
    ORDER BY s.total_exec_time + s.total_plan_time DESC LIMIT ${KINDRED_BENCH_STATEMENTS:-30}" || true
