#!/usr/bin/env bash
# conformance-compiled.sh [TARGET...]: the compiled engine on every ONNX node test and real model, per
# target (default: x86_64-avx512 x86_64-avx2 aarch64-cortex-a72). Prints one summary line per target
# and suite; the counts go into docs/conformance.md. Takes tens of minutes (AArch64 runs under QEMU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$root/build/bin/kiln
shared=$root/../shared
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(x86_64-avx512 x86_64-avx2 aarch64-cortex-a72)
for t in "${targets[@]}"; do
  line=$("$kiln" conformance "$shared/onnx-node" --engine compiled --target "$t" \
         --known-failures "$root/tests/conformance/known_failures.txt" | tail -n 1) || true
  echo "$t onnx-node: $line"
  # The fp16 model's reference was computed in float16 (models/README.md): its own tolerance. A failing
  # suite prints its counts and the script goes on to the next.
  line=$("$kiln" conformance "$shared/models" --engine compiled --target "$t" --rtol 1e-3 --atol 1e-4 \
         --filter '^(?!.*fp16)' | tail -n 1) || true
  echo "$t models (rtol 1e-3, atol 1e-4): $line"
  line=$("$kiln" conformance "$shared/models" --engine compiled --target "$t" --rtol 5e-2 --atol 2e-3 \
         --filter 'fp16' | tail -n 1) || true
  echo "$t fp16 models (rtol 5e-2, atol 2e-3): $line"
done
