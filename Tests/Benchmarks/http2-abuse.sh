#!/usr/bin/env bash
# Benchmarks the runtime under the HTTP/2 attacks of issue 16: a release build of the interop server with its
# default limits, an h2load victim (-c1 -m1 on Echo) before and during each attack, the server's peak RSS,
# and how fast each attacking connection was cut off. Attackers connect from 127.0.0.2 (outside the victim's
# penalty, when it is on). Usage: [ABUSE_PENALTY=seconds] Tests/Benchmarks/http2-abuse.sh [seconds-per-phase
# (default 5)]; ABUSE_PENALTY turns the penalty by address on with that first penalty (default: off).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_PHASE=${1:-5}

swift build -c release --product kindred-interop-server >/dev/null
BIN="$(swift build -c release --show-bin-path)/kindred-interop-server"
WORK=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT

"$BIN" --port 0 --log-level error --abuse-penalty "${ABUSE_PENALTY:-0}" >"$WORK/out" 2>"$WORK/err" &
SERVER=$!
for _ in $(seq 100); do grep -q LISTENING "$WORK/out" && break; sleep 0.1; done
PORT=$(awk '/LISTENING/ {print $2}' "$WORK/out" | sed 's/.*://')

python3 - "$WORK" <<'PY'
import struct, sys
message = b"\x0a\x0dhello kindred"
open(f"{sys.argv[1]}/echo.bin", "wb").write(struct.pack(">BI", 0, len(message)) + message)
PY

echo "HTTP/2 attacks against $BIN ($(nproc) cores), ${SECONDS_PER_PHASE} s per phase"
h2load -n 20000 -c 10 -m 10 -d "$WORK/echo.bin" -H 'content-type: application/grpc' \
    "http://127.0.0.1:$PORT/kindred.testing.v1.InteropService/Echo" >/dev/null 2>&1 # warm-up
echo "server RSS after warm-up: $(awk '/VmRSS/ {print $2, $3}' /proc/$SERVER/status)"
python3 Tests/Benchmarks/http2_abuse.py "$PORT" "$SERVER" "$WORK/echo.bin" "$SECONDS_PER_PHASE"
echo "server RSS at the end: $(awk '/VmRSS/ {print $2, $3}' /proc/$SERVER/status)"
