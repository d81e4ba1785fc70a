#!/usr/bin/env bash
# Instructions per call of the proto3 JSON mapping on a deck page (GetDeckResponse, 20 cards) and its
# request, next to the binary path's encode/decode of the same messages, counted by callgrind (stable
# on a shared, noisy machine; wall-clock ns/op: run the bench binary without arguments).
#
#   Tests/Benchmarks/protojson-bench.sh [CALLS]     CALLS per operation (default 200)
#
# valgrind cannot read Swift 6.3's release debuginfo, so it runs a copy stripped of it. Each figure is
# (instructions of a run of CALLS - instructions of a run of 0) / CALLS; both runs pay the same start-up.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
calls="${1:-200}"
command -v valgrind >/dev/null || { echo "needs valgrind: apt-get install valgrind" >&2; exit 1; }
cd "$root"
swift build -c release --product kindred-protojson-bench >/dev/null
binary="$(mktemp)"
trap 'rm -f "$binary"' EXIT
strip --strip-debug -o "$binary" "$(swift build -c release --show-bin-path)/kindred-protojson-bench"
"$binary" | head -2
instructions() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" "$1" "$2" 2>&1 | awk '/Collected/ {print $4}'
}
for operation in response-to-json response-encode-binary response-from-json response-decode-binary \
    request-from-json request-decode-binary request-to-json; do
    base="$(instructions "$operation" 0)"
    total="$(instructions "$operation" "$calls")"
    printf '%-24s %10d instructions/call\n' "$operation" $(((total - base) / calls))
done
