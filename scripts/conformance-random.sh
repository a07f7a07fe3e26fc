#!/usr/bin/env bash
# Whole models compiled with a random program per task (--schedule random) and checked against their
# stored reference outputs, for each seed given (default 1 2 3). Usage:
#   scripts/conformance-random.sh [--target T] [SEED...]      results in build/conformance-random/
set -euo pipefail
cd "$(dirname "$0")/.."
target=host
if [ "${1:-}" = "--target" ]; then target=$2; shift 2; fi
seeds=("$@")
[ ${#seeds[@]} -eq 0 ] && seeds=(1 2 3)
out=build/conformance-random
mkdir -p "$out"
scripts/build.sh kiln >/dev/null
status=0
for model in $(find ../shared/models -name model.onnx | sort); do
  dir=$(dirname "$model")
  name=$(basename "$dir")
  tol=()
  case "$name" in
    *fp16*) tol=(--rtol 5e-2 --atol 2e-3) ;;
    yolox_nano) tol=(--rtol 1e-3 --atol 1e-4) ;;
  esac
  for seed in "${seeds[@]}"; do
    if result=$(build/bin/kiln conformance "$dir" --engine compiled --target "$target" --schedule random --seed "$seed" \
                  "${tol[@]}" --min-passed 1 2>&1); then
      echo "ok    $name seed $seed: $(echo "$result" | tail -1)"
    else
      echo "FAIL  $name seed $seed: $(echo "$result" | tail -3 | tr '\n' ' ')"
      status=1
    fi
  done
done | tee "$out/$target.txt"
grep -q "^FAIL" "$out/$target.txt" && status=1
exit $status
