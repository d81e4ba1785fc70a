#!/usr/bin/env bash
# Offline quality of discovery's ranking (issue 12, DESIGN §4): a generated population with known latent
# preferences swipes random decks (warm-up), the recommender learns from 80 % of those swipes, and the report
# gives the AUC of like prediction on the other 20 % next to the latent model's own AUC (the ceiling), then
# matches per 100 swipes when every member swipes decks ranked by each policy (random, distance-only,
# like-only, Kindred's reciprocal ranking, and the latent oracle).
# Usage: Tests/Benchmarks/discovery-quality.sh [members=3000] [seeds="1 2 3"] [warm-up swipes per member=40]
set -euo pipefail
cd "$(dirname "$0")/../.."
members="${1:-3000}"
seeds="${2:-1 2 3}"
warmup="${3:-40}"
swift build -c release --product kindred-discovery-quality >/dev/null
for seed in $seeds; do
    .build/release/kindred-discovery-quality "$members" "$seed" "$warmup"
    echo
done
