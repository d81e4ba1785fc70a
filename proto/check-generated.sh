#!/usr/bin/env bash
# Fails when the committed generated code (Sources/CKindredProto/{generated,include,registry.c},
# Sources/KindredProto, docs/api) differs from what proto/generate.sh makes from proto/ today.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

"$root/proto/generate.sh" "$scratch" >/dev/null

status=0
compare() {
    if ! diff -r -u "$root/$1" "$scratch/$1" >"$scratch/diff.txt" 2>&1; then
        echo "error: $1 is out of date with proto/:" >&2
        head -n 40 "$scratch/diff.txt" >&2
        status=1
    fi
}
compare Sources/CKindredProto/generated
compare Sources/CKindredProto/include
compare Sources/CKindredProto/registry.c
compare Sources/KindredProto
compare docs/api

if [ "$status" -ne 0 ]; then
    echo "error: generated protobuf code or API reference has drifted; run proto/generate.sh and commit the result." >&2
    exit 1
fi
echo "generated protobuf code and API reference are up to date"
