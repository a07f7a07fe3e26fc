#!/usr/bin/env bash
# quantize-ort-compare.sh MODEL_DIR INPUTS SAMPLES [kiln conformance flags...]
# Quantizes a float model of ../shared/models (MODEL_DIR/model.onnx) with `kiln quantize`, calibrated
# on its test data and SAMPLES seeded inputs (0 where seeded values mean nothing: token ids), weights
# per channel, every quantized activation's codes made an output too (--expose-codes); then compares
# kiln with ONNX Runtime on the model's own test inputs (INPUTS: the graph inputs' names, comma-
# separated, in input_N.pb order): the codes of every layer exactly (conformance compares integers exactly),
# the float outputs to 1e-5 (float ops after the last quantized one, a Softmax, add up in their own
# order in each runtime). Exits 77 (skip) when MODEL_DIR is not there.
# On an x86 core without VNNI, ONNX Runtime's u8 x s8 kernels add pairs of products in 16 bits with
# saturation (vpmaddubsw), which exact integer arithmetic does not: there the model is quantized with
# --reduce-range (7-bit codes), as ONNX Runtime's documentation advises for such cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model_dir=$1
inputs=$2
samples=$3
shift 3
if [ ! -f "$model_dir/model.onnx" ]; then
  echo "skip: no $model_dir/model.onnx"
  exit 77
fi
flags=(--per-channel --samples "$samples" --expose-codes)
if grep -q -m1 -E '^flags.* (sse2|avx2)( |$)' /proc/cpuinfo && ! grep -q -m1 -E '^flags.* (avx512_vnni|avx_vnni)( |$)' /proc/cpuinfo; then
  flags+=(--reduce-range)
  echo "x86 without VNNI: --reduce-range"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
name=$(basename "$model_dir")
"$root/build/bin/kiln" quantize "$model_dir/model.onnx" -o "$work/$name.int8.onnx" --data "$model_dir" "${flags[@]}"
run_flags=""
i=0
for input in ${inputs//,/ }; do
  run_flags+=" --input $input=$model_dir/test_data_set_0/input_$i.pb"
  i=$((i + 1))
done
KILN_RUN_FLAGS="$run_flags" "$root/scripts/ort-compare.sh" "$work/$name.int8.onnx" 1 --rtol 1e-5 --atol 1e-6 "$@"
