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
scripts/build.sh kiln kiln_unit_tests >/dev/null
models=(mnist-8 squeezenet1.0_fp32 mobilenetv3_small_112_headless bert_toy)
declare -A bindings=([bert_toy]="--dim batch=1 --dim max_seq_len_in_batch=8")
status=0
for m in "${models[@]}"; do
  echo "== $m ($programs programs per task, seed $seed)"
  if ! build/bin/kiln check-schedules "../shared/models/$m/model.onnx" --programs "$programs" --seed "$seed" --unoptimized ${bindings[$m]:-} \
      | tee "$out/$m.txt" | grep -v "^  FAIL" ; then
    status=1
  fi
done
echo "== single ops ($programs programs per task)"
KILN_SCHEDULE_PROGRAMS=$programs build/bin/kiln_unit_tests --gtest_filter='RandomPrograms.*' | tee "$out/single_ops.txt" | tail -3 || status=1
exit $status
