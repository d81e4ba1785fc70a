#!/usr/bin/env bash
# From a message to the recipient's phone, end to end through a release cluster (services/run-cluster.sh: every
# server, private PostgreSQL with synchronous_commit=on): chat answers SendMessage, its outbox brings MessageSent to
# notify, notify's sender asks chat whether the recipient has the app open (no: no Subscribe stream) and profile for
# the sender's name, and pushes through APNsProvider to the local APNs peer (Tests/Peers/apns_peer.py with several
# processes, checking every push's provider token, headers and payload), which records when each push arrived.
# kindred-chat-bench --mode push impersonates auth and match (tokens signed with auth's key, MatchCreated delivered
# to chat) so that PAIRS matched pairs have open threads, registers an APNs device for the second member of each
# pair at notify, and sends RATE messages/s (open loop) for SECONDS, pairs in turn: a thread sees one message every
# PAIRS / RATE seconds. The script links each message (its thread and device, and the time SendMessage answered) to
# the first push about that thread the peer received after it, and prints p50/p99/max of that time, with
# notify-server's CPU time per push and its resident memory (the driver reads /proc).
#
# Notify holds a new message's notification KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS (3 s by default) for more messages
# of its thread, so that a burst is one push: that wait is by design and is all of the latency at the default. The
# fourth argument sets it (default 0 here: the pipeline's own latency; pass 3000 for the deployed behaviour).
# The first 2 s of messages are the warm-up (connections opened, the provider token signed) and are not counted.
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

if [ -z "${KINDRED_BIN_DIR:-}" ]; then
    for product in auth-server profile-server discovery-server match-server chat-server gateway-server notify-server \
        kindred-chat-bench; do
        swift build -c release --product "$product" >/dev/null
    done
    KINDRED_BIN_DIR="$(swift build -c release --show-bin-path)"
fi
export KINDRED_BIN_DIR

WORK="$(mktemp -d /tmp/kindred-push-e2e.XXXXXX)"
chmod 755 "$WORK"
BASE="$(free_port_base 46050)"

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
start_cluster "$WORK" --no-push-peers
trap 'stop_cluster; kill "$PEER" 2>/dev/null || true' EXIT
wait_for_cluster "$WORK/cluster.log" "$CLUSTER"
NOTIFY_PID=$(ss -Htlnp "( sport = :$((BASE + 6)) )" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2) || true  # its gRPC port
[ -n "$NOTIFY_PID" ] || { echo "notify-server is not running (see run-cluster's notices):"; cat "$WORK/cluster.log"; exit 1; }
echo "cluster ($KINDRED_BIN_DIR) on port base $BASE; APNs peer 127.0.0.1:$PEER_PORT ($PROCESSES processes); notify-server pid" \
    "$NOTIFY_PID, collapse window ${COLLAPSE_MS} ms; $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"

"$KINDRED_BIN_DIR/kindred-chat-bench" --mode push --chat "127.0.0.1:$((BASE + 5))" --notify "127.0.0.1:$((BASE + 6))" \
    --signing-key "$WORK/data/auth/signing-key.pem" --users $((2 * PAIRS)) --rate "$RATE" --duration "$SECONDS_PER_RUN" \
    --notify-pid "$NOTIFY_PID" --sends "$WORK/sends.txt" --record "$WORK/apns-peer.jsonl"
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
first = min(float(answered) for _, _, answered in sends)
latencies, missing, covered = [], 0, collections.Counter()
for thread, device, answered in sends:
    answered = float(answered)
    if answered < first + 2:
        continue  # warm-up
    times = pushes.get((device, thread.replace("-", "").lower()), [])
    at = bisect.bisect_left(times, answered)
    if at == len(times):
        missing += 1
        continue
    latencies.append((times[at] - answered) * 1000)
    covered[(device, thread, times[at])] += 1
latencies.sort()
pick = lambda p: latencies[min(len(latencies) - 1, int(len(latencies) * p))] if latencies else float("nan")
total = sum(len(times) for times in pushes.values())
print(f"pushes accepted by the peer: {total} (refused {refused}); messages counted: {len(latencies) + missing}, "
      f"pushed {len(latencies)}, no push after them {missing}; messages per push {len(latencies) / max(1, len(covered)):.2f}")
print(f"SendMessage answered -> push at the APNs peer, ms: p50 {pick(0.5):.1f}  p90 {pick(0.9):.1f}  "
      f"p99 {pick(0.99):.1f}  max {latencies[-1] if latencies else float('nan'):.1f}")
PY
