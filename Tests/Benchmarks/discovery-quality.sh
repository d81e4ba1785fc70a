#!/usr/bin/env bash
# Offline quality of discovery's ranking (issue 12, DESIGN §4): a generated population with known latent
# preferences swipes random candidates (warm-up), the recommender learns from 80 % of those swipes, and the
# report gives the AUC of like prediction on the other 20 % next to the latent model's own AUC (the ceiling),
# then matches per 100 swipes when every member swipes decks ranked by each policy (random, distance-only,
# like-only, Kindred's reciprocal ranking — the service's own scorer — and the latent oracle), each deck drawn
# from the pool of the nearest unseen compatible members as the service draws it.
# Usage: Tests/Benchmarks/discovery-quality.sh [members=10000] [seeds="1"] [warm-up swipes=40] [pool=500|all] [cities=1]
#        Tests/Benchmarks/discovery-quality.sh curve [members=10000] [seed=1]   # warm-up 20/40/100/200, pools 100/200/500
#        Tests/Benchmarks/discovery-quality.sh 3000 1 40 all 4                  # the first harness's population
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build -c release --product kindred-discovery-quality >/dev/null
if [ "${1:-}" = curve ]; then
    exec .build/release/kindred-discovery-quality curve "${2:-10000}" "${3:-1}"
fi
members="${1:-10000}"
seeds="${2:-1}"
warmup="${3:-40}"
pool="${4:-500}"
cities="${5:-1}"
for seed in $seeds; do
    .build/release/kindred-discovery-quality "$members" "$seed" "$warmup" "$pool" "$cities"
    echo
done
