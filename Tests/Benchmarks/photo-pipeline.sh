#!/usr/bin/env bash
# The photo pipeline on a 12-megapixel JPEG (4000×3000, colour gradients with noise, ~3.5 MB at q90, made by
# Pillow): uploads/s, p50/p99 per upload, CPU per upload and peak RSS with 1 and 8 concurrent uploaders, each
# producing every rendition (4 sizes × JPEG + WebP).
# Usage: Tests/Benchmarks/photo-pipeline.sh [seconds per run (default 20)] [webp efforts (default "2")]
# Builds kindred-photo-bench in release (once; it costs the other processes on the machine CPU). CPU per upload
# moves far less than uploads/s when other processes share the cores: compare that figure across machines.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_RUN=${1:-20}
EFFORTS=${2:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

swift build -c release --product kindred-photo-bench >/dev/null
BENCH="$(swift build -c release --show-bin-path)/kindred-photo-bench"
python3 Tests/KindredVipsTests/python/make_images.py --large 4000x3000 "$WORK/photo-12mp.jpg"
echo "input: $(stat -c %s "$WORK/photo-12mp.jpg") bytes, 4000x3000 JPEG q90; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"

for effort in $EFFORTS; do
    for workers in 1 8; do
        "$BENCH" "$WORK/photo-12mp.jpg" --workers "$workers" --seconds "$SECONDS_PER_RUN" --warmup 3 \
            --webp-effort "$effort" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("webp effort %s, %d uploader(s): %.1f uploads/s, p50 %.0f ms, p99 %.0f ms, CPU %.0f ms/upload, "
      "peak RSS %.0f MiB, renditions %d bytes (%d uploads)" % (
          sys.argv[1], r["workers"], r["uploadsPerSecond"], r["p50Ms"], r["p99Ms"], r["cpuMsPerUpload"],
          r["peakRssKiB"] / 1024, r["first"]["renditionBytes"], r["uploads"]))
' "$effort"
    done
done
