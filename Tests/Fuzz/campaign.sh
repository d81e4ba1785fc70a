#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for the given number of seconds (default 5: the short run of
# Tests/run.sh; a long campaign is e.g. `Tests/Fuzz/campaign.sh 600`). Each run starts from the committed seeds
# (Corpus/<target>, crash inputs of fixed bugs included, so every run replays them) plus what earlier runs on this
# machine found (.build/fuzz-corpus/<target>), with the target's dictionary. Prints one line per target
# (executions, coverage, corpus) and fails if any target crashed, leaked or broke a property; the input that did is
# written to .build/fuzz-artifacts/.
#   FUZZ_TARGETS="FuzzProtobuf FuzzJWT"   only these targets
#   FUZZ_JOBS=2                           targets run side by side (default 1)
#   FUZZ_SKIP_BUILD=1                     use the binaries already built
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-5}"
all="FuzzProtobuf FuzzGRPCFraming FuzzProtoJSON FuzzPageTokenMediaURL FuzzJWT FuzzSMTPReply FuzzTextGeohash"
all+=" FuzzPhotoContainer FuzzHTTP2Server FuzzHTTP1 FuzzNATS"
read -r -a targets <<<"${FUZZ_TARGETS:-$all}"
jobs="${FUZZ_JOBS:-1}"

# -sanitize=fuzzer,address in one option: the Swift driver keeps only the last -sanitize= it is given, so
# SwiftPM's --sanitize=fuzzer --sanitize=address would build without coverage instrumentation.
if [ -z "${FUZZ_SKIP_BUILD:-}" ]; then
    swift build -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address
fi
bin="$(swift build --show-bin-path)"
mkdir -p .build/fuzz-corpus .build/fuzz-artifacts .build/fuzz-logs

run() {
    local target="$1" log=".build/fuzz-logs/$1.log" dict=()
    mkdir -p ".build/fuzz-corpus/$target"
    [ -f "Dictionaries/$target.dict" ] && dict=("-dict=Dictionaries/$target.dict")
    local status=0
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" "$bin/$target" "${dict[@]}" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -max_len=8192 -print_final_stats=1 \
        -artifact_prefix=".build/fuzz-artifacts/$target-" \
        ".build/fuzz-corpus/$target" "Corpus/$target" >"$log" 2>&1 || status=$?
    local executions coverage
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    coverage=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' || true)
    if [ "$status" -eq 0 ]; then
        echo "$target: ok, ${executions:-?} executions in ${seconds}s, ${coverage:-no coverage line}"
    else
        echo "$target: FAILED (exit $status) after ${executions:-?} executions; log $PWD/$log:"
        grep -E 'property broken|Fatal error|ERROR: |SUMMARY|Test unit written' "$log" | head -n 8 | sed 's/^/    /'
        return 1
    fi
}

failed=0
running=0
for target in "${targets[@]}"; do
    run "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
exit "$failed"
