#!/usr/bin/env bash
# Benchmarks the Web Push provider (KindredPush.WebPushProvider: RFC 8291 encryption with a fresh ECDH key per push,
# a VAPID token per origin, HTTP2Client over nghttp2 + OpenSSL) against the local Web Push peer
# (Tests/Peers/webpush_peer.py, Python h2 over TLS, verifying VAPID and decrypting every push with http_ece), with
# kindred-push-bench: closed loop on one connection and on several, then an open loop at 500 pushes/s; pushes/s
# delivered, p50/p99 from send to outcome, and the CPU time per push of the driver (client) and of the peer.
# Usage: Tests/Benchmarks/push-webpush.sh [seconds per run (default 10)] [connections for the "several" run (4)]
# KINDRED_BENCH_CONFIGURATION=debug measures the debug build instead of building for release.
# KINDRED_BUILD_PATH: the SwiftPM scratch path of the build (default .build).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_RUN=${1:-10}
SEVERAL=${2:-4}
CONFIGURATION=${KINDRED_BENCH_CONFIGURATION:-release}

BUILD=(swift build -c "$CONFIGURATION")
[ -n "${KINDRED_BUILD_PATH:-}" ] && BUILD+=(--scratch-path "$KINDRED_BUILD_PATH")  # as run-cluster.sh takes it
"${BUILD[@]}" --product kindred-push-bench >/dev/null
BIN="$("${BUILD[@]}" --show-bin-path)"
WORK="$(mktemp -d /tmp/kindred-webpush-bench.XXXXXX)"
python3 Tests/Peers/push_test_keys.py "$WORK" >/dev/null
python3 Tests/Peers/webpush_peer.py --cert "$WORK/server.pem" --key "$WORK/server-key.pem" \
    --vapid-public-key "$WORK/vapid-key.pub.pem" >"$WORK/peer.out" 2>"$WORK/peer.err" </dev/null &
PEER=$!
cleanup() { kill "$PEER" 2>/dev/null || true; wait "$PEER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 100); do grep -q LISTENING "$WORK/peer.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(awk '/LISTENING/ {print $2}' "$WORK/peer.out")
echo "Web Push peer on 127.0.0.1:$PORT (pid $PEER), $CONFIGURATION driver, $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"

# One subscription, made as a browser would (the peer keeps its private key and decrypts every push).
read -r ENDPOINT P256DH AUTH < <(python3 - "$PORT" "$WORK/ca.pem" <<'PY'
import sys, httpx
with httpx.Client(http2=True, verify=sys.argv[2]) as client:
    s = client.post(f"https://127.0.0.1:{sys.argv[1]}/subscribe").json()
print(s["endpoint"], s["p256dh"], s["auth"])
PY
)

peer_cpu() { awk '{print $14 + $15}' "/proc/$PEER/stat"; }  # clock ticks
TICKS=$(getconf CLK_TCK)

run() {
    local before after
    before=$(peer_cpu)
    line=$("$BIN/kindred-push-bench" --web-push-endpoint "$ENDPOINT" --p256dh "$P256DH" --auth "$AUTH" \
        --ca "$WORK/ca.pem" --key "$WORK/vapid-key.pem" --duration "$SECONDS_PER_RUN" "$@")
    after=$(peer_cpu)
    delivered=$(echo "$line" | sed -E 's/.*\(([0-9]+) delivered, ([0-9]+) not\).*/\1 \2/' | awk '{print $1 + $2}')
    echo "$line, peer CPU $(awk -v t=$((after - before)) -v hz="$TICKS" -v n="$delivered" \
        'BEGIN {printf "%.1f µs/push", n ? t / hz / n * 1e6 : 0}') (includes the 2 s warm-up's share)"
}

run --connections 1 --concurrency 200
run --connections "$SEVERAL" --concurrency 400
run --connections 1 --rate 500
