#!/usr/bin/env bash
# The gRPC runtime's cost per unary Echo call in CPU instructions, counted by valgrind's callgrind: unlike req/s or
# CPU time, instruction counts barely move when other processes share the cores, so a change's effect shows on a
# busy machine. Four rows, each a server or client run under callgrind twice (a warm-up alone, then the warm-up and
# the measured calls) so that start-up and shutdown cancel out: instructions per call = the difference / calls.
#   server Kindred   the interop server (every feature on) answering h2load at -c10 -m10
#   server bare      kindred-grpc-yardstick (SwiftNIO + nghttp2 + protobuf-c, no feature) under the same load
#   client Kindred   kindred-grpc-client-bench: GRPCClient making the calls (2 connections, 10 in flight, as the
#                    gateway calls each service), against the yardstick
#   client bare      h2load making the same calls (-c2 -m5) against the yardstick
# Then each Kindred row's most expensive functions (self cost over the measured run, demangled).
# Usage: Tests/Benchmarks/grpc-callgrind.sh [calls (default 5000)] [top functions shown (default 25)]
# KINDRED_INTEROP_SERVER / KINDRED_YARDSTICK / KINDRED_CLIENT_BENCH run other binaries (e.g. an older commit's), and
# KINDRED_CALLGRIND_KEEP=<folder> keeps the callgrind output files there (for callgrind_annotate or kcachegrind).
set -euo pipefail
cd "$(dirname "$0")/../.."
CALLS=${1:-5000}
TOP=${2:-25}
WARMUP=500

BINS=""
if [ -z "${KINDRED_INTEROP_SERVER:-}" ] || [ -z "${KINDRED_YARDSTICK:-}" ] || [ -z "${KINDRED_CLIENT_BENCH:-}" ]; then
    for product in kindred-interop-server kindred-grpc-yardstick kindred-grpc-client-bench; do
        swift build -c release --product "$product" >/dev/null
    done
    BINS=$(swift build -c release --show-bin-path)
fi
SERVER_BIN=${KINDRED_INTEROP_SERVER:-$BINS/kindred-interop-server}
YARDSTICK_BIN=${KINDRED_YARDSTICK:-$BINS/kindred-grpc-yardstick}
CLIENT_BIN=${KINDRED_CLIENT_BENCH:-$BINS/kindred-grpc-client-bench}
DEMANGLE=$(command -v swift-demangle || echo /opt/swift/usr/bin/swift-demangle)

WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
# valgrind 3.19 cannot read the DWARF 5 debug information of Swift 6.3 release builds ("possibly corrupted
# debuginfo file"): it runs copies without it (the symbol table stays, so functions keep their names).
for bin in SERVER_BIN YARDSTICK_BIN CLIENT_BIN; do
    objcopy --strip-debug "${!bin}" "$WORK/$(basename "${!bin}")"
    printf -v "$bin" '%s' "$WORK/$(basename "${!bin}")"
done
# valgrind 3.19 writes into the signal mask passed to sigsuspend, which libdispatch (the main thread of an `async`
# main parks in `_dispatch_sig_thread`) keeps in read-only memory: valgrind itself crashes ("the 'impossible'
# happened", SIGSEGV). A preloaded sigsuspend passes a copy.
cat >"$WORK/sigsuspend.c" <<'C'
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, 8);
}
C
"${CC:-cc}" -shared -fPIC -O2 -o "$WORK/sigsuspend.so" "$WORK/sigsuspend.c"
python3 - "$WORK" <<'PY'
import struct, sys
message = b"\x0a\x0dhello kindred"
open(f"{sys.argv[1]}/echo.bin", "wb").write(struct.pack(">BI", 0, len(message)) + message)
PY
ECHO=/kindred.testing.v1.InteropService/Echo

h2() { # address requests clients streams
    local out failed
    out=$(h2load -n "$2" -c "$3" -m "$4" -d "$WORK/echo.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://$1$ECHO" 2>&1)
    failed=$(echo "$out" | awk '/^requests:/ {print $10 + $12}')
    if [ "$failed" != "0" ]; then echo "h2load against $1: $failed requests failed or errored" >&2; exit 1; fi
}
listen() { # output file -> host:port once the process printed LISTENING (slow under callgrind)
    for _ in $(seq 600); do grep -q LISTENING "$1" 2>/dev/null && break; sleep 0.1; done
    awk '/LISTENING/ {print $2; exit}' "$1"
}
total() { # callgrind output file -> instructions executed
    awk '/^(summary|totals):/ {print $2; exit}' "$1"
}
callgrind() { # output file, command... (replaces the shell it runs in: call it in a subshell or with &)
    local out=$1
    shift
    LD_PRELOAD="$WORK/sigsuspend.so" exec valgrind --tool=callgrind --callgrind-out-file="$out" --dump-instr=no \
        --compress-strings=no "$@"
}

# A server under callgrind: warm-up calls, then `extra` more, then SIGTERM (callgrind writes its counts at exit).
server_run() { # name binary args... ; reads EXTRA
    local name=$1 bin=$2 address pid
    shift 2
    callgrind "$WORK/$name.out" "$bin" "$@" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr" &
    pid=$!
    PIDS+=("$pid")
    address=$(listen "$WORK/$name.stdout")
    [ -n "$address" ] || { echo "$name did not start under callgrind" >&2; cat "$WORK/$name.stderr" >&2; exit 1; }
    h2 "$address" "$WARMUP" 10 10
    if [ "$EXTRA" -gt 0 ]; then h2 "$address" "$EXTRA" 10 10; fi
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
}

# A client under callgrind against the (native) yardstick.
client_run() { # name command-builder ; reads EXTRA, BARE_ADDRESS
    local name=$1
    case $name in
    client-kindred-*) (callgrind "$WORK/$name.out" "$CLIENT_BIN" "$BARE_ADDRESS" "$((WARMUP + EXTRA))" 10 >/dev/null 2>"$WORK/$name.stderr") ;;
    client-bare-*)
        (callgrind "$WORK/$name.out" h2load -n "$((WARMUP + EXTRA))" -c 2 -m 5 -d "$WORK/echo.bin" \
            -H 'content-type: application/grpc' -H 'te: trailers' "http://$BARE_ADDRESS$ECHO" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr")
        grep -q "$((WARMUP + EXTRA)) succeeded" "$WORK/$name.stdout" || { echo "h2load under callgrind failed" >&2; exit 1; }
        ;;
    esac
}

per_call() { # name -> instructions per measured call
    awk -v a="$(total "$WORK/$1-base.out")" -v b="$(total "$WORK/$1-measured.out")" -v n="$CALLS" \
        'BEGIN {printf "%.0f", (b - a) / n}'
}

"$YARDSTICK_BIN" 0 >"$WORK/native-yardstick.out" 2>&1 &
PIDS+=($!)
BARE_ADDRESS=$(listen "$WORK/native-yardstick.out")

echo "Instructions per unary Echo call, callgrind, $CALLS calls after $WARMUP warm-up ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
for EXTRA in 0 "$CALLS"; do
    suffix=$([ "$EXTRA" = 0 ] && echo base || echo measured)
    server_run "server-kindred-$suffix" "$SERVER_BIN" --port 0
    server_run "server-bare-$suffix" "$YARDSTICK_BIN" 0
    client_run "client-kindred-$suffix"
    client_run "client-bare-$suffix"
done
server_kindred=$(per_call server-kindred)
server_bare=$(per_call server-bare)
client_kindred=$(per_call client-kindred)
client_bare=$(per_call client-bare)
printf '%-16s %10s instructions/call\n' "server Kindred" "$server_kindred" "server bare" "$server_bare" \
    "client Kindred" "$client_kindred" "client bare" "$client_bare"
awk -v sk="$server_kindred" -v sb="$server_bare" -v ck="$client_kindred" -v cb="$client_bare" \
    'BEGIN {printf "Kindred / bare: server %.2f, client %.2f\n", sk / sb, ck / cb}'

# Where a call's instructions go: each function's own instructions in the measured run minus the warm-up run,
# per call (so start-up work drops out), demangled.
top() { # name
    callgrind_annotate --inclusive=no --threshold=100 "$WORK/$1-base.out" >"$WORK/$1-base.txt" 2>/dev/null
    callgrind_annotate --inclusive=no --threshold=100 "$WORK/$1-measured.out" >"$WORK/$1-measured.txt" 2>/dev/null
    python3 - "$WORK/$1-base.txt" "$WORK/$1-measured.txt" "$CALLS" "$TOP" <<'PY' | "$DEMANGLE" --simplified | cut -c1-160
import re, sys
def read(path):
    costs = {}
    for line in open(path):
        match = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$", line)
        if match and "PROGRAM TOTALS" not in match.group(2):
            name = re.sub(r"^\S*:", "", match.group(2), count=1) if not match.group(2).startswith("???:") else match.group(2)[4:]
            name = re.sub(r" \[/tmp/[^]]*/([^/\]]+)\]$", r" [\1]", name)
            costs[name] = costs.get(name, 0) + int(match.group(1).replace(",", ""))
    return costs
base, measured = read(sys.argv[1]), read(sys.argv[2])
calls, top = int(sys.argv[3]), int(sys.argv[4])
rows = sorted(((measured[name] - base.get(name, 0)) / calls, name) for name in measured)
total = sum(max(cost, 0) for cost, _ in rows)
for cost, name in reversed(rows[-top:]):
    print(f"{cost:9.0f} {100 * cost / total:5.1f}%  {name}")
PY
}
for name in server-kindred client-kindred; do
    echo
    echo "$name: top $TOP functions, own instructions per call"
    top "$name"
done
if [ -n "${KINDRED_CALLGRIND_KEEP:-}" ]; then
    mkdir -p "$KINDRED_CALLGRIND_KEEP"
    cp "$WORK"/*.out "$KINDRED_CALLGRIND_KEEP/"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
