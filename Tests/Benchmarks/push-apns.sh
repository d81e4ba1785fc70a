#!/usr/bin/env bash
# Benchmarks the APNs provider (KindredPush.APNsProvider on HTTP2Client: nghttp2 + OpenSSL) against the local
# APNs peer (Tests/Peers/apns_peer.py, Python h2 over TLS, verifying every push), with kindred-push-bench:
#   1. closed loop, one connection and several: pushes/s delivered, p50/p99 from send to outcome;
#   2. open loop at 500 pushes/s on one connection: the latency each push saw;
#   3. the peer's own ceiling with h2load (nghttp2's load tool, no Kindred code), with one connection and with
#      the "several" run's connections;
# with the CPU time per push of the driver (client) and of the peer (all its processes).
# One Python event loop tops out near a thousand pushes/s, so the peer serves with several processes (each its own
# event loop on the same port, SO_REUSEPORT; the kernel spreads connections over them by their addresses, so a
# single connection reaches one process only). The runs print how the connections fell on the peer's processes.
# Usage: Tests/Benchmarks/push-apns.sh [seconds per run (default 10)] [connections for the "several" run (8)]
#        [peer processes (2)]
# KINDRED_BUILD_PATH: the SwiftPM scratch path of the release build (default .build).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_RUN=${1:-10}
SEVERAL=${2:-8}
PROCESSES=${3:-2}

BUILD=(swift build -c release)
[ -n "${KINDRED_BUILD_PATH:-}" ] && BUILD+=(--scratch-path "$KINDRED_BUILD_PATH")  # as run-cluster.sh takes it
"${BUILD[@]}" --product kindred-push-bench >/dev/null
BIN="$("${BUILD[@]}" --show-bin-path)"
WORK="$(mktemp -d /tmp/kindred-push-bench.XXXXXX)"
python3 Tests/Peers/push_test_keys.py "$WORK" >/dev/null
python3 Tests/Peers/apns_peer.py --cert "$WORK/server.pem" --key "$WORK/server-key.pem" \
    --public-key "$WORK/apns-key.pub.pem" --key-id KEY1234567 --team-id TEAM123456 --topic com.kindred.bench \
    --processes "$PROCESSES" >"$WORK/peer.out" 2>"$WORK/peer.err" </dev/null &
PEER=$!
cleanup() { kill "$PEER" 2>/dev/null || true; wait "$PEER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 100); do grep -q LISTENING "$WORK/peer.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(awk '/LISTENING/ {print $2}' "$WORK/peer.out")
PEER_PIDS=("$PEER" $(ps -o pid= --ppid "$PEER"))
echo "APNs peer on 127.0.0.1:$PORT (pids ${PEER_PIDS[*]}: $PROCESSES processes), release driver, $(nproc) cores;" \
    "load: $(cut -d' ' -f1-3 /proc/loadavg)"

peer_cpu() { for pid in "${PEER_PIDS[@]}"; do cat "/proc/$pid/stat"; done | awk '{sum += $14 + $15} END {print sum}'; }
TICKS=$(getconf CLK_TCK)
# How the open connections to the peer fall on its processes: "pid:connections ...".
spread() {
    ss -Htnp state established "( sport = :$PORT )" | grep -o 'pid=[0-9]*' | sort | uniq -c |
        awk '{sub("pid=", "", $2); printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1}'
}

run() {
    local before after
    before=$(peer_cpu)
    ( sleep 3; spread >"$WORK/spread" ) &  # after the warm-up opened the connections
    local spreading=$!
    line=$("$BIN/kindred-push-bench" --url "https://127.0.0.1:$PORT" --ca "$WORK/ca.pem" --key "$WORK/apns-key.p8" \
        --topic com.kindred.bench --duration "$SECONDS_PER_RUN" "$@")
    after=$(peer_cpu)
    wait "$spreading"
    delivered=$(echo "$line" | sed -E 's/.*\(([0-9]+) delivered, ([0-9]+) not\).*/\1 \2/' | awk '{print $1 + $2}')
    echo "$line, peer CPU $(awk -v t=$((after - before)) -v hz="$TICKS" -v n="$delivered" \
        'BEGIN {printf "%.1f µs/push", n ? t / hz / n * 1e6 : 0}') (includes the 2 s warm-up's share);" \
        "connections per peer process: $(cat "$WORK/spread")"
}

run --connections 1 --concurrency 200
run --connections "$SEVERAL" --concurrency 800
run --connections 1 --rate 500

# The peer's ceiling without Kindred: h2load with one valid provider token (the peer caches its signature check).
if command -v h2load >/dev/null; then
    TOKEN=$(python3 - "$WORK/apns-key.p8" <<'PY'
import base64, json, sys, time
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
head = b64(json.dumps({"alg": "ES256", "kid": "KEY1234567"}).encode())
body = b64(json.dumps({"iss": "TEAM123456", "iat": int(time.time())}).encode())
r, s = decode_dss_signature(key.sign(f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256())))
print(f"{head}.{body}." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
PY
)
    echo '{"aps":{"alert":{"title":"New message","body":"New message from Alex"},"badge":1,"sound":"default"}}' >"$WORK/payload.json"
    for clients in 1 "$SEVERAL"; do
        before=$(peer_cpu)
        echo "peer ceiling (h2load -c$clients -m100, 20000 pushes; $PROCESSES peer processes):"
        h2load -n 20000 -c "$clients" -m 100 -d "$WORK/payload.json" -H "authorization: bearer $TOKEN" \
            -H "apns-topic: com.kindred.bench" -H "apns-push-type: alert" -H "apns-priority: 10" \
            "https://127.0.0.1:$PORT/3/device/$(printf 'ab%.0s' $(seq 32))" | grep -E "finished in|requests:|status codes:"
        after=$(peer_cpu)
        echo "  peer CPU $(awk -v t=$((after - before)) -v hz="$TICKS" 'BEGIN {printf "%.1f µs/push", t / hz / 20000 * 1e6}')"
    done
fi
