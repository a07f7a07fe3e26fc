#!/usr/bin/env bash
# Issue 16's property run: PROGRAMS random programs per distinct task of every zoo network at a small
# size, each proven in bounds (scheduler/lower/bounds_check.h) or refused, then compiled in-process and
# compared with the tensor-expression evaluator. A crash stops kiln (non-zero exit, "crashed" below);
# a wrong answer is a FAIL line. Usage: scripts/check-schedules-zoo.sh [PROGRAMS] [SEED] (defaults 100,
# 1); results in build/schedule-check-zoo/. Takes about 40 minutes at 100 on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
programs=${1:-100}
seed=${2:-1}
out=build/schedule-check-zoo
mkdir -p "$out"
scripts/build.sh kiln >/dev/null
declare -A args=([resnet50]="--size 32" [mobilenet_v2]="--size 32" [resnet3d18]="--size 16" [dcgan]=""
                 [bert_base]="--seq 16")
status=0
for m in resnet50 mobilenet_v2 resnet3d18 dcgan bert_base; do
  # shellcheck disable=SC2086
  build/bin/kiln zoo "$m" ${args[$m]} -o "$out/$m.onnx" >/dev/null
  echo "== $m (${args[$m]:-default size}; $programs programs per task, seed $seed)"
  rc=0
  build/bin/kiln check-schedules "$out/$m.onnx" --programs "$programs" --seed "$seed" >"$out/$m.txt" 2>&1 || rc=$?
  grep -v "^  \(FAIL\|REFUSED\)" "$out/$m.txt" | tail -n 1
  if [ "$rc" -gt 1 ]; then echo "   crashed or stopped (exit $rc): see $out/$m.txt"; fi
  [ "$rc" -eq 0 ] || status=1
done
exit $status
