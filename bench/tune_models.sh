#!/usr/bin/env bash
# bench/tune_models.sh [--trials-per-task P] [--models "NAME ..."] [--threads T] [--records-dir DIR]
#
# Tunes whole models for bench/compare_ort.sh --records-dir: `kiln tune MODEL --target host
# --trials-per-task P` (default 64) into DIR/NAME.json (default build/bench/records), resuming when the
# records exist. NAME is a model under ../shared/models (its test inputs' shapes bind symbolic
# dimensions) or a `kiln zoo` network. Prints each model's tuning time and final estimate.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
per_task=64
threads=2
models="mnist-8 squeezenet1.0_fp32 mobilenetv3_small_112_headless ultraface_rfb320 yolox_nano bert_toy"
dir=$root/build/bench/records
while [ $# -gt 0 ]; do
  case $1 in
    --trials-per-task) per_task=$2; shift ;;
    --models) models=$2; shift ;;
    --threads) threads=$2; shift ;;
    --records-dir) dir=$2; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "tune_models.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$kiln" ] || { echo "tune_models.sh: $kiln not found; build kiln first" >&2; exit 2; }
"$root/scripts/install-ort.sh"
mkdir -p "$dir"
models_dir=${MODELS_DIR:-$root/../shared/models}
for name in $models; do
  model=$models_dir/$name/model.onnx
  if [ ! -f "$model" ]; then
    model=$dir/$name.onnx
    "$kiln" zoo "$name" --batch 1 -o "$model" >/dev/null
  fi
  shape_args=()
  if [ -d "$models_dir/$name/test_data_set_0" ]; then
    mapfile -t shape_args < <(node "$root/bench/ort/input_shapes.mjs" "$model" "$models_dir/$name/test_data_set_0")
  fi
  t0=$(date +%s)
  # Rounds of half the per-task budget (8 to 64): a task's second round evolves from its first.
  "$kiln" tune "$model" --target host --records "$dir/$name.json" --trials-per-task "$per_task" \
    --measures-per-round $(( per_task / 2 < 8 ? 8 : (per_task / 2 > 64 ? 64 : per_task / 2) )) \
    --threads "$threads" --plain "${shape_args[@]}" >"$dir/$name.tune.log" 2>&1 ||
    { echo "  $name: kiln tune failed (see $dir/$name.tune.log)" >&2; continue; }
  echo "  $name: $(( $(date +%s) - t0 )) s; $(tail -n 1 "$dir/$name.tune.log")" >&2
done
