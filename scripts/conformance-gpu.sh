#!/usr/bin/env bash
# conformance-gpu.sh: GPU programs on every ONNX node test and real model, on a machine without a GPU
# (issue 21): the default GPU schedule run thread after thread on the host (--schedule gpu-serial, and
# random shared-memory tiles with gpu-serial-random),
# and CUDA packages for sm_80 and sm_90 built without running (--compile-only: PTX assembled by ptxas).
# On a GPU host, bench/gpu/device_run.sh runs the packages themselves. Prints one line per suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$root/build/bin/kiln
shared=$root/../shared
known=$root/tests/conformance/known_failures.txt
run() {  # LABEL DIR ARGS...
  local label=$1 dir=$2
  shift 2
  echo "$label: $("$kiln" conformance "$dir" --engine compiled "$@" | tail -n 1)"
}
run "gpu-serial onnx-node" "$shared/onnx-node" --schedule gpu-serial --known-failures "$known"
run "gpu-serial models (rtol 1e-3, atol 1e-4)" "$shared/models" --schedule gpu-serial --rtol 1e-3 --atol 1e-4
for seed in 1 2; do
  run "gpu-serial-random seed $seed models" "$shared/models" --schedule gpu-serial-random --seed $seed --rtol 1e-3 --atol 1e-4 --filter '^(?!.*fp16)'
done
for sm in 80 90; do
  run "cuda-sm$sm onnx-node (compile only)" "$shared/onnx-node" --target cuda-sm$sm --compile-only --known-failures "$known"
  run "cuda-sm$sm models (compile only)" "$shared/models" --target cuda-sm$sm --compile-only
done
