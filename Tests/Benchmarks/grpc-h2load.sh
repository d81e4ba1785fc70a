#!/usr/bin/env bash
# Benchmarks the gRPC runtime against its yardstick with h2load (a real HTTP/2 peer): release builds of the interop
# server (Kindred, every feature on) and of kindred-grpc-yardstick (the bare SwiftNIO + nghttp2 + protobuf-c Echo
# the runtime is built on), both answering InteropService/Echo. Rounds alternate between the two (and which goes
# first), so each round's ratio Kindred ÷ bare compares the two under the same machine load: on a shared,
# noisy machine the ratio holds where absolute figures do not. Then -c1 -m1 latency of each, with the vCPUs
# kept awake (see `awake`).
# With --with-grpc-swift, a third server joins the rounds: grpc-swift-2 2.4.3 answering the same Echo (the separate
# package Tests/Benchmarks/grpc-swift-2/echo-server, built release here, never by CI), and each round also prints
# Kindred ÷ grpc-swift-2 (issue 15 asks for ≥ 10×). Its first build fetches and compiles grpc-swift-2, SwiftNIO,
# nio-http2 and nio-ssl (BoringSSL): about 15 minutes on this 2-core machine under load.
# Usage: Tests/Benchmarks/grpc-h2load.sh [--with-grpc-swift] [requests per round (default 100000)] [rounds (default 5)]
# KINDRED_INTEROP_SERVER / KINDRED_YARDSTICK / KINDRED_GRPC_SWIFT run other binaries (e.g. built from an older commit).
set -euo pipefail
cd "$(dirname "$0")/../.."
WITH_GRPC_SWIFT=0
if [ "${1:-}" = "--with-grpc-swift" ]; then WITH_GRPC_SWIFT=1; shift; fi
REQUESTS=${1:-100000}
ROUNDS=${2:-5}

if [ -z "${KINDRED_YARDSTICK:-}" ]; then
    swift build -c release --product kindred-grpc-yardstick >/dev/null
fi
YARDSTICK_BIN="${KINDRED_YARDSTICK:-$(swift build -c release --show-bin-path)/kindred-grpc-yardstick}"

# shellcheck source=Tests/Benchmarks/interop-server.sh
source Tests/Benchmarks/interop-server.sh
"$YARDSTICK_BIN" 0 >"$WORK/yardstick.out" 2>&1 &
YARDSTICK=$!
GRPC_SWIFT=""
trap 'kill $SERVER $YARDSTICK $GRPC_SWIFT 2>/dev/null || true; wait $SERVER $YARDSTICK $GRPC_SWIFT 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q LISTENING "$WORK/yardstick.out" && break; sleep 0.1; done
BARE_ADDRESS=$(awk '/LISTENING/ {print $2}' "$WORK/yardstick.out")
if [ "$WITH_GRPC_SWIFT" = 1 ]; then
    GRPC_SWIFT_PACKAGE=Tests/Benchmarks/grpc-swift-2/echo-server
    if [ -z "${KINDRED_GRPC_SWIFT:-}" ]; then
        swift build -c release --package-path "$GRPC_SWIFT_PACKAGE" --product grpc-swift-2-echo >/dev/null
    fi
    GRPC_SWIFT_BIN="${KINDRED_GRPC_SWIFT:-$(swift build -c release --package-path "$GRPC_SWIFT_PACKAGE" --show-bin-path)/grpc-swift-2-echo}"
    "$GRPC_SWIFT_BIN" 0 >"$WORK/grpc-swift.out" 2>&1 &
    GRPC_SWIFT=$!
    for _ in $(seq 100); do grep -q LISTENING "$WORK/grpc-swift.out" && break; sleep 0.1; done
    GRPC_SWIFT_ADDRESS=$(awk '/LISTENING/ {print $2}' "$WORK/grpc-swift.out")
fi
ECHO=/kindred.testing.v1.InteropService/Echo

h2() { # address clients streams requests -> h2load output
    h2load -n "$4" -c "$2" -m "$3" -d "$WORK/echo.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://$1$ECHO" 2>&1
}
rps() { # address clients streams requests -> req/s (fails if any request failed)
    local out failed
    out=$(h2 "$@")
    failed=$(echo "$out" | awk '/^requests:/ {print $10 + $12}')
    if [ "$failed" != "0" ]; then echo "h2load against $1: $failed requests failed or errored" >&2; exit 1; fi
    echo "$out" | awk '/^finished in/ {print $4}'
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # pid -> user + sys CPU ticks
measure() { # pid address -> "req/s cpu-µs-per-call": throughput, and the server's CPU time per call (which other
    local before rate after # processes on the cores move far less than req/s)
    before=$(ticks "$1")
    rate=$(rps "$2" 10 10 "$REQUESTS")
    after=$(ticks "$1")
    awk -v r="$rate" -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$REQUESTS" \
        'BEGIN {printf "%s %.2f", r, t / hz / n * 1e6}'
}
latency() { # address -> mean request time at -c1 -m1
    h2 "$1" 1 1 "$((REQUESTS / 5))" | awk '/^time for request:/ {print $6}'
}

# On an idle VM every -c1 -m1 round trip pays two vCPU wake-ups (server and h2load sleep in epoll between
# requests), which costs more than the request itself. The latency rows run with two idle-priority (nice 19) busy
# loops keeping the vCPUs from halting; they take no CPU from the measured processes.
awake() {
    local spinners=()
    for _ in 1 2; do nice -n 19 bash -c 'while :; do :; done' & spinners+=($!); done
    "$@"
    kill "${spinners[@]}" 2>/dev/null || true
    wait "${spinners[@]}" 2>/dev/null || true
}

echo "Kindred $BIN vs bare $YARDSTICK_BIN ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
rps "$ADDRESS" 10 10 20000 >/dev/null # warm-up
rps "$BARE_ADDRESS" 10 10 20000 >/dev/null
if [ -n "$GRPC_SWIFT" ]; then rps "$GRPC_SWIFT_ADDRESS" 10 10 20000 >/dev/null; fi
ratios=()
cpu_ratios=()
swift_ratios=()
swift_cpu_ratios=()
for round in $(seq "$ROUNDS"); do
    # Which server goes first (then second, third) turns with the rounds.
    order=(kindred bare)
    if [ -n "$GRPC_SWIFT" ]; then order+=(grpc_swift); fi
    shift_by=$(((round - 1) % ${#order[@]}))
    order=("${order[@]:shift_by}" "${order[@]:0:shift_by}")
    for which in "${order[@]}"; do
        case $which in
        kindred) read -r kindred kindred_cpu <<<"$(measure "$SERVER" "$ADDRESS")" ;;
        bare) read -r bare bare_cpu <<<"$(measure "$YARDSTICK" "$BARE_ADDRESS")" ;;
        grpc_swift) read -r swift swift_cpu <<<"$(measure "$GRPC_SWIFT" "$GRPC_SWIFT_ADDRESS")" ;;
        esac
    done
    ratio=$(awk -v k="$kindred" -v b="$bare" 'BEGIN {printf "%.2f", k / b}')
    ratios+=("$ratio")
    cpu_ratios+=("$(awk -v k="$kindred_cpu" -v b="$bare_cpu" 'BEGIN {printf "%.2f", k / b}')")
    printf 'round %d  -c10 -m10  Kindred %9s req/s %6s µs CPU/call   bare %9s req/s %6s µs CPU/call   Kindred/bare %s' \
        "$round" "$kindred" "$kindred_cpu" "$bare" "$bare_cpu" "$ratio"
    if [ -n "$GRPC_SWIFT" ]; then
        swift_ratio=$(awk -v k="$kindred" -v s="$swift" 'BEGIN {printf "%.2f", k / s}')
        swift_ratios+=("$swift_ratio")
        swift_cpu_ratios+=("$(awk -v k="$kindred_cpu" -v s="$swift_cpu" 'BEGIN {printf "%.2f", s / k}')")
        printf '   grpc-swift-2 %9s req/s %6s µs CPU/call   Kindred/grpc-swift-2 %s' "$swift" "$swift_cpu" "$swift_ratio"
    fi
    echo
done
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "median Kindred/bare at -c10 -m10: $(printf '%s\n' "${ratios[@]}" | median) (req/s);" \
    "CPU per call bare/Kindred $(printf '%s\n' "${cpu_ratios[@]}" | median | awk '{printf "%.2f", 1 / $1}')"
if [ -n "$GRPC_SWIFT" ]; then
    echo "median Kindred/grpc-swift-2 at -c10 -m10: $(printf '%s\n' "${swift_ratios[@]}" | median) (req/s);" \
        "CPU per call grpc-swift-2/Kindred $(printf '%s\n' "${swift_cpu_ratios[@]}" | median)"
fi
echo "-c1 -m1 mean latency (vCPUs awake): Kindred $(awake latency "$ADDRESS")   bare $(awake latency "$BARE_ADDRESS")" \
    "${GRPC_SWIFT:+  grpc-swift-2 $(awake latency "$GRPC_SWIFT_ADDRESS")}"
echo "RSS: Kindred $(awk '/VmRSS/ {print $2, $3}' /proc/$SERVER/status)   bare $(awk '/VmRSS/ {print $2, $3}' /proc/$YARDSTICK/status)" \
    "${GRPC_SWIFT:+  grpc-swift-2 $(awk '/VmRSS/ {print $2, $3}' /proc/$GRPC_SWIFT/status)}"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
