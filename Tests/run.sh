#!/usr/bin/env bash
# The test command: generated-code drift check, every Swift test, every fuzz target for a few seconds, and the
# Python interop and cluster suites.
set -euo pipefail
cd "$(dirname "$0")/.."

services/install-deps.sh
proto/check-generated.sh

swift build --build-tests
# At most eight tests at once: Swift Testing otherwise starts every test together, hundreds of servers and
# databases sharing two cores, and calls with deadlines of a few seconds missed them.
swift test --skip-build --parallel --num-workers 2 --experimental-maximum-parallelization-width 8
Tests/Fuzz/campaign.sh "${KINDRED_FUZZ_SECONDS:-5}"

# Two test files at a time (pytest-xdist, a file's tests in one worker so its module-scoped cluster is started once):
# most of a cluster test is waiting on servers, and one at a time left half of the two cores idle (26 min against 15).
KINDRED_BIN_PATH="$(swift build --show-bin-path)" python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
    Tests/Interop Tests/Cluster
