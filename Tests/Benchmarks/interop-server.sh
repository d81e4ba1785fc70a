# shellcheck shell=bash
# Sourced by the gRPC benchmarks: starts a release interop server on a free port of 127.0.0.1 and writes the
# gRPC-framed request bodies. Sets WORK (a temporary folder, removed at exit), SERVER (its pid) and ADDRESS
# (host:port). KINDRED_INTEROP_SERVER runs another binary instead (e.g. one built from an older commit, to compare;
# alternate the two).
if [ -z "${KINDRED_INTEROP_SERVER:-}" ]; then
    swift build -c release --product kindred-interop-server >/dev/null
fi
BIN="${KINDRED_INTEROP_SERVER:-$(swift build -c release --show-bin-path)/kindred-interop-server}"
WORK=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT

"$BIN" --port 0 >"$WORK/out" 2>"$WORK/err" &
SERVER=$!
for _ in $(seq 100); do grep -q LISTENING "$WORK/out" && break; sleep 0.1; done
# shellcheck disable=SC2034 # for the script that sources this file
ADDRESS=$(awk '/LISTENING/ {print $2}' "$WORK/out")

# EchoRequest{message: "hello kindred"} and an empty HealthCheckRequest, each behind its 5-byte gRPC prefix.
python3 - "$WORK" <<'PY'
import struct, sys
message = b"\x0a\x0dhello kindred"
open(f"{sys.argv[1]}/echo.bin", "wb").write(struct.pack(">BI", 0, len(message)) + message)
open(f"{sys.argv[1]}/health.bin", "wb").write(struct.pack(">BI", 0, 0))
PY
