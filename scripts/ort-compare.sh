#!/usr/bin/env bash
# ort-compare.sh MODEL.onnx [SEED] [kiln conformance flags...]
# Compares kiln with ONNX Runtime on one model: kiln writes seeded inputs, ONNX Runtime (npm
# onnxruntime-node, one thread) computes the outputs, and `kiln conformance` checks kiln against them.
# KILN_RUN_FLAGS: flags for `kiln run` (input shapes, --freeze; frozen inputs are written too).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1
seed=${2:-1}
shift $(( $# >= 2 ? 2 : 1 ))
"$root/scripts/install-ort.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case_dir="$work/$(basename "${model%.onnx}")"
mkdir -p "$case_dir/test_data_set_0"
cp "$model" "$case_dir/model.onnx"
read -r -a run_flags <<<"${KILN_RUN_FLAGS:-}"
"$root/build/bin/kiln" run "$model" "${run_flags[@]}" --seed "$seed" --save-inputs "$case_dir/test_data_set_0" --print 0 >/dev/null
node "$root/bench/ort/run_case.mjs" "$case_dir" 1 >/dev/null
"$root/build/bin/kiln" conformance "$case_dir" --min-passed 1 "$@"
