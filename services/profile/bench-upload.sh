#!/usr/bin/env bash
# Photo upload benchmark (README, Performance): builds the release servers once, then runs bench_upload.py
# (a local cluster; 12 MP JPEG uploads through the gateway with 1 and 8 concurrent uploaders).
#   services/profile/bench-upload.sh [--seconds 20] [--concurrency 1 8]
set -euo pipefail
cd "$(dirname "$0")/../.."
for product in auth-server profile-server gateway-server kindred; do swift build -c release --product "$product"; done
KINDRED_BIN_PATH="$(swift build -c release --show-bin-path)" python3 services/profile/bench_upload.py "$@"
