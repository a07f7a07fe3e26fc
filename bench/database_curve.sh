#!/usr/bin/env bash
# bench/database_curve.sh [--db "MODEL ..."] [--db-trials N] [--model MODEL] [--trials N] [--seed S] [--out FILE]
#                         [--reference R]
#
# The record database's effect on a model that is not in it (issue 18, "learning across models"): the
# --db models are tuned first (N trials per task; their records and features go to build/bench/database/db),
# then --model is tuned twice from scratch with the same seed and budget (N trials per task), without
# and with `--database build/bench/database/db`. Prints the estimated end-to-end latency (the tuner's
# objective) after each quarter of the budget and after the finalists' re-measurement, for both runs.
# With --reference R, a third run without the database gets R trials per task (the issue's criterion:
# with the database, N trials per task should reach 90% of what R reach without it), and the table
# gives its estimate after the finalists too. Records already under build/bench/database/db (a
# model's R.json and R.json.features, e.g. from bench/tune_models.sh) join the database untuned.
# Models are names under ../shared/models (their first .onnx). Not part of ctest; takes minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
models_dir=${MODELS_DIR:-$root/../shared/models}
db_models="squeezenet1.0_fp32 mobilenetv3_small_112_headless"
db_trials=16
model=ultraface_rfb320
trials=8
seed=1
reference=0
out=/dev/stdout
while [ $# -gt 0 ]; do
  case $1 in
    --db) db_models=$2; shift ;;
    --db-trials) db_trials=$2; shift ;;
    --model) model=$2; shift ;;
    --trials) trials=$2; shift ;;
    --seed) seed=$2; shift ;;
    --reference) reference=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "database_curve.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$kiln" ] || { echo "database_curve.sh: $kiln not found; build kiln first" >&2; exit 2; }
onnx_of() { find "$models_dir/$1" -maxdepth 1 -name '*.onnx' | sort | head -n 1; }
work=$root/build/bench/database
mkdir -p "$work/db"
for m in $db_models; do
  [ -f "$work/db/$m.json.features" ] && continue
  echo "tuning $m for the database ($db_trials trials per task)" >&2
  "$kiln" tune "$(onnx_of "$m")" --target host --records "$work/db/$m.json" --trials-per-task "$db_trials" \
    --seed "$seed" --plain --finalists 0 >"$work/db/$m.log"
done
run() {  # run NAME PER_TASK [extra args]: tunes $model from scratch, the plain log to $work/NAME.log
  local name=$1 per_task=$2
  shift 2
  rm -f "$work/$name.json" "$work/$name.json.features"
  "$kiln" tune "$(onnx_of "$model")" --target host --records "$work/$name.json" --trials-per-task "$per_task" \
    --seed "$seed" --plain "$@" >"$work/$name.log"
}
echo "tuning $model without the database" >&2
run without "$trials"
echo "tuning $model with the database" >&2
run with "$trials" --database "$work/db"
if [ "$reference" -gt 0 ]; then
  echo "tuning $model without the database, $reference trials per task" >&2
  run reference "$reference"
fi
# The objective after the first round that reaches each quarter of the budget, and at the end.
points() {
  python3 - "$1" <<'EOF'
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.search(r"estimated latency ([0-9.]+|-) ms \| trials (\d+)/(\d+)", line)
    if m and "finalists" not in line:
        rows.append((int(m.group(2)), int(m.group(3)), m.group(1)))
final = re.findall(r"kiln tune: \d+ trials, estimated latency ([0-9.]+|-) ms", open(sys.argv[1]).read())
goal = rows[-1][1] if rows else 0
out = []
for q in (1, 2, 3, 4):
    hit = next((r for r in rows if r[0] >= goal * q / 4), None)
    out.append(f"{hit[2]} ({hit[0]})" if hit else "-")
out.append(final[-1] if final else "-")
print(" | ".join(out))
EOF
}
samples=$(sed -n 's/.*database .*: \([0-9]*\) sample(s) of \([0-9]*\) other task(s).*/\1 samples of \2 tasks/p' "$work/with.log")
{
  echo "### Record database: $model tuned with and without it"
  echo
  echo "- command: \`bench/database_curve.sh --db \"$db_models\" --db-trials $db_trials --model $model --trials $trials --seed $seed --reference $reference\`"
  echo "- machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores; kiln $(git -C "$root" rev-parse --short HEAD)"
  echo "- database: $(cd "$work/db" && ls -- *.json.features | sed 's/\.json\.features$//' | tr '\n' ' ')($samples; the --db models tuned at $db_trials trials per task)"
  echo
  echo "Estimated latency in ms (trials so far) after each quarter of the budget, then after the finalists' re-measurement:"
  echo
  echo "| run | 1/4 | 1/2 | 3/4 | all | finalists |"
  echo "|---|---:|---:|---:|---:|---:|"
  echo "| without database | $(points "$work/without.log") |"
  echo "| with database | $(points "$work/with.log") |"
  if [ "$reference" -gt 0 ]; then echo "| without database, $reference trials per task | $(points "$work/reference.log") |"; fi
} >"$out"
