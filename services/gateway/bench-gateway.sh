#!/usr/bin/env bash
# Benchmarks the gateway with h2load against a real cluster (release build, private PostgreSQL, auth, gateway).
# BENCH_REQUESTS (default 50000) and BENCH_SHAPES (default "-c10 -m10;-c1 -m1") tune the runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
services/install-deps.sh
# One product per command: with several --product options swift build builds only the last one.
swift build -c release --product auth-server
swift build -c release --product gateway-server
KINDRED_BIN_PATH="$(swift build -c release --show-bin-path)" python3 services/gateway/bench_gateway.py
