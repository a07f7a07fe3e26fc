#!/usr/bin/env bash
# The full property test of the schedule space (issue: every program correct): PROGRAMS random programs
# per distinct task of each model, compiled in-process and compared with the tensor-expression
# evaluator. CI runs a bounded share (tests/scheduler/CMakeLists.txt); this runs the recorded count.
# Usage: scripts/check-schedules.sh [PROGRAMS] [SEED]   (defaults 200, 1); results in build/schedule-check/.
set -euo pipefail
cd "$(dirname "$0")/.."
programs=${1:-200}
seed=${2:-1}
out=build/schedule-check
mkdir -p "$out"
scripts/build.sh kiln >/dev/null
models=(mnist-8 squeezenet1.0_fp32 mobilenetv3_small_112_headless bert_toy)
status=0
for m in "${models[@]}"; do
  echo "== $m ($programs programs per task, seed $seed)"
  if ! build/bin/kiln check-schedules "../shared/models/$m/model.onnx" --programs "$programs" --seed "$seed" --unoptimized \
      | tee "$out/$m.txt" | grep -v "^  FAIL" ; then
    status=1
  fi
done
for z in matmul_prime conv1x1 conv3x3 conv_strided conv_padded depthwise grouped softmax layernorm reduce pool; do :; done
exit $status
