#!/usr/bin/env bash
# bench/compare_ort.sh [--no-zoo] [--quick] [--models "NAME:RUNS ..."] [--zoo "NAME:RUNS ..."]
#                      [--npm "NAME:RUNS ..."] [--out FILE] [--records-dir DIR]
# (--quick: a fifth of the runs, at least 3; a smoke test, not a measurement.)
# --records-dir: models with tuning records DIR/NAME.json (bench/tune_models.sh writes them) are also
# compiled with `--records` and timed tuned; the table then has untuned, tuned and ORT side by side
# and kiln/ORT is tuned kiln's.
#
# Untuned kiln (the default schedule) against ONNX Runtime (npm onnxruntime-node 1.30.0, CPU), with 1
# and 2 threads, side by side: for each model, `kiln compile --target host`, then per thread count
# `kiln run PKG --input ... --repeat N --threads T` (its runner times only the model call) immediately
# followed by bench/ort/time_model.mjs on the same inputs (warm-up, then N timed session.run calls,
# intraOpNumThreads = T), so both see the same machine state. ORT also checks kiln's outputs
# (|kiln - ort| <= atol + rtol*|ort|); a mismatch is reported in the table, not hidden.
#
# Table 1: the real models under ../shared/models (their test_data_set_0 inputs). Table 2 (unless
# --no-zoo): the Ansor paper's networks from `kiln zoo` at batch 1 (seeded random inputs). Table 3:
# real models from npm packages (tests/models/npm_models.tsv, compiled with the table's input shapes
# and frozen inputs; seeded inputs); --npm "" leaves it out. The
# markdown goes to bench/RESULTS.md (--out); a "## Reading" section already in that file is kept.
# Needs build/bin/kiln (or $KILN); not part of ctest. Takes about 5 minutes on 2 cores (under 10).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmdline=bench/compare_ort.sh
for a in "$@"; do case $a in *[[:space:]]*) cmdline+=" '$a'" ;; *) cmdline+=" $a" ;; esac; done
kiln=${KILN:-$root/build/bin/kiln}
models_dir=${MODELS_DIR:-$root/../shared/models}
out=$root/bench/RESULTS.md
zoo=1
quick=0
records_dir=""
# model:repeat. Repeats are chosen so each measurement takes a few seconds with the default schedule.
# (Untuned, 1 thread, on a 2-core EPYC: squeezenet ~110 ms, yolox_nano ~110 ms, ultraface ~30 ms,
# mobilenetv3 ~3 ms; zoo resnet50 ~1.7 s, resnet3d18 ~25 s, bert_base ~0.8 s, dcgan ~0.4 s.)
models="squeezenet1.0_fp32:21 mobilenetv3_small_112_headless:301 ultraface_rfb320:61 yolox_nano:15 mnist-8:1001 bert_toy:1001"
zoo_models="resnet50:3 mobilenet_v2:21 resnet3d18:3 dcgan:9 bert_base:5 lstm_kws:201 gru_refine:201 detector_nms:201"
npm_models="silero_vad_v5:3001 silero_vad_legacy:1001 silero_vad_legacy_sr16000:1001"
compile_flags=()  # extra `kiln compile` flags of the model being measured (npm models' frozen inputs)
while [ $# -gt 0 ]; do
  case $1 in
    --no-zoo) zoo=0 ;;
    --quick) quick=1 ;;
    --models) models=$2; shift ;;
    --zoo) zoo_models=$2; shift ;;
    --npm) npm_models=$2; shift ;;
    --out) out=$2; shift ;;
    --records-dir) records_dir=$(cd "$2" && pwd); shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "compare_ort.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$kiln" ] || { echo "compare_ort.sh: $kiln not found; build kiln first" >&2; exit 2; }
if [ -z "$models" ] && [ -z "$npm_models" ] && { [ "$zoo" = 0 ] || [ -z "$zoo_models" ]; }; then
  echo "compare_ort.sh: no models to compare (--models \"\" and --npm \"\" with --no-zoo or --zoo \"\")" >&2
  exit 2
fi
"$root/scripts/install-ort.sh"
work=$root/build/bench/compare  # not build/bench itself: tuning records and op results live beside it
rm -rf "$work"
mkdir -p "$work"
: >"$work/models.md"  # an empty table when --models ""
time_ort="$root/bench/ort/time_model.mjs"
start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# rows accumulate "| model | T | kiln | ort | ratio | check |" lines; ratios feed the geometric means.
declare -A logratio_sum logratio_n
row() {  # row TABLE MODEL T KILN_MS ORT_MS CHECK RUNS [UNTUNED_MS UNTUNED_MEDIAN KILN_MEDIAN]
  local ratio
  ratio=$(awk -v k="$4" -v o="$5" 'BEGIN { if (k == "" || o == "" || o <= 0) print "n/a"; else printf "%.2f", k / o }')
  if [ "$ratio" != "n/a" ]; then
    logratio_sum[$1:$3]=$(awk -v s="${logratio_sum[$1:$3]:-0}" -v k="$4" -v o="$5" 'BEGIN { printf "%.9f", s + log(k / o) }')
    logratio_n[$1:$3]=$(( ${logratio_n[$1:$3]:-0} + 1 ))
  fi
  if [ -n "$records_dir" ]; then
    local speedup speedup_median
    speedup=$(awk -v u="${8:-}" -v k="$4" 'BEGIN { if (u == "" || k == "" || k <= 0) print "n/a"; else printf "%.2fx", u / k }')
    speedup_median=$(awk -v u="${9:-}" -v k="${10:-}" 'BEGIN { if (u == "" || k == "" || k <= 0) print "n/a"; else printf "%.2fx", u / k }')
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$2" "$3" "${7:-}" "${8:-fail}" "${4:-fail}" "${5:-fail}" \
      "$ratio" "$speedup" "$speedup_median" "$6" >>"$work/$1.md"
    return
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$2" "$3" "${7:-}" "${4:-fail}" "${5:-fail}" "$ratio" "$6" >>"$work/$1.md"
}
geomean() {  # geomean TABLE T
  local n=${logratio_n[$1:$2]:-0}
  [ "$n" -gt 0 ] || { echo "n/a"; return; }
  awk -v s="${logratio_sum[$1:$2]}" -v n="$n" 'BEGIN { printf "%.2f", exp(s / n) }'
}

# measure TABLE NAME MODEL.onnx INPUT_DIR REPEAT: compile once, then per thread count kiln then ORT.
measure() {
  local table=$1 name=$2 model=$3 inputs=$4 repeat=$5
  [ "$quick" = 1 ] && repeat=$(( repeat / 5 > 3 ? repeat / 5 : 3 ))
  local pkg=$work/pkg/$name t0 t1
  # Symbolic dimensions bound to the data's shapes (--input-shape NAME=DIMS per input file).
  local -a shape_args=()
  mapfile -t shape_args < <(node "$root/bench/ort/input_shapes.mjs" "$model" "$inputs")
  t0=$(date +%s.%N)
  if ! "$kiln" compile "$model" --target host -o "$pkg" --name model "${shape_args[@]}" "${compile_flags[@]}" >"$work/$name.compile.log" 2>&1; then
    echo "  $name: kiln compile failed: $(tail -n 3 "$work/$name.compile.log" | tr '\n' ' ')" >&2
    for t in 1 2; do row "$table" "$name" $t "" "" "kiln compile failed"; done
    return
  fi
  t1=$(date +%s.%N)
  echo "$name $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >>"$work/compile_s.txt"
  # Tuned: the same model compiled with its records; the untuned package is then only timed.
  local tuned=""
  if [ -n "$records_dir" ] && [ -f "$records_dir/$name.json" ]; then
    tuned=$work/pkg/$name.tuned
    if ! "$kiln" compile "$model" --target host -o "$tuned" --name model --records "$records_dir/$name.json" \
        "${shape_args[@]}" "${compile_flags[@]}" >"$work/$name.compile-tuned.log" 2>&1; then
      echo "  $name: kiln compile --records failed: $(tail -n 3 "$work/$name.compile-tuned.log" | tr '\n' ' ')" >&2
      tuned=""
    fi
  fi
  # --input name=file for every package input (its metadata), input_N.pb by the model's input order
  # (shape_args' names): a frozen input is in the files but not in the package.
  local -a input_args=() model_inputs=()
  local k in_name
  for (( k = 1; k < ${#shape_args[@]}; k += 2 )); do model_inputs+=("${shape_args[k]%%=*}"); done
  while read -r in_name; do
    for k in "${!model_inputs[@]}"; do
      [ "${model_inputs[k]}" = "$in_name" ] && input_args+=(--input "$in_name=$inputs/input_$k.pb")
    done
  done < <(python3 -c 'import json,sys; [print(i["name"]) for i in json.load(open(sys.argv[1]))["inputs"]]' "$pkg/model.json")
  # Per thread count: one run writes kiln's outputs and ORT checks them; then kiln (tuned when there
  # are records), untuned kiln and ORT are timed in turns (bench/interleave.py), `rounds` turns of
  # repeat/rounds runs each, so that all of them see the same moments of this shared machine.
  local rounds=5
  [ "$quick" = 1 ] && rounds=2
  local per=$(( repeat / rounds > 1 ? repeat / rounds : 1 ))
  for t in 1 2; do
    local kout=$work/out/$name.t$t kms="" oms="" check ums="" kmed="" umed="" olog times
    local timed=${tuned:-$pkg}
    if ! "$kiln" run "$timed" "${input_args[@]}" --repeat 1 --threads "$t" --print 0 --output-dir "$kout" \
        >/dev/null 2>"$work/$name.t$t.kiln.err"; then
      check="kiln run failed: $(head -c 120 "$work/$name.t$t.kiln.err" | tr '\n|' '  ')"
      row "$table" "$name" "$t" "" "" "$check" "$(( per * rounds ))" ""
      continue
    fi
    olog=$(node "$time_ort" "$model" "$inputs" "$t" 1 --warmup 0 --check "$kout" 2>&1) || true
    if grep -q '^check: ok' <<<"$olog"; then check="ok ($(sed -n 's/^check: ok max|diff| \([^ ]*\).*/\1/p' <<<"$olog"))"
    elif grep -q '^check: MISMATCH' <<<"$olog"; then check="MISMATCH: $(sed -n 's/^check: MISMATCH //p' <<<"$olog" | cut -d';' -f1,2 | tr '|' ' ')"
    else check="ORT failed: $(tail -n 1 <<<"$olog" | head -c 120 | tr '|' ' ')"; fi
    local -a contestants=(
      "kiln=$(printf '%q ' "$kiln" run "$timed" "${input_args[@]}" --repeat "$per" --threads "$t" --print 0)"
      "ort=$(printf '%q ' node "$time_ort" "$model" "$inputs" "$t" "$per")")
    [ -n "$tuned" ] && contestants+=("untuned=$(printf '%q ' "$kiln" run "$pkg" "${input_args[@]}" --repeat "$per" --threads "$t" --print 0)")
    times=$(python3 "$root/bench/interleave.py" --rounds "$rounds" "${contestants[@]}")
    field() { awk -v n="$1" -v f="$2" '$1 == n && $2 == "min" { v = (f == "min" ? $3 : $5); printf "%.3f", v }' <<<"$times"; }
    kms=$(field kiln min); oms=$(field ort min); kmed=$(field kiln median)
    if [ -n "$tuned" ]; then ums=$(field untuned min); umed=$(field untuned median); fi
    grep -q '^kiln failed' <<<"$times" && check="kiln timing failed: $(sed -n 's/^kiln failed: //p' <<<"$times" | tr '|' ' ')"
    grep -q '^ort failed' <<<"$times" && check="$check; ORT timing failed"
    row "$table" "$name" "$t" "$kms" "$oms" "$check" "$(( per * rounds ))" "$ums" "$umed" "$kmed"
    printf '  %-32s T=%s  kiln %10s ms (untuned %s)  ORT %10s ms  %s\n' "$name" "$t" "${kms:-fail}" "${ums:--}" "${oms:-fail}" "$check" >&2
  done
}

echo "models (repeat counts: $models)" >&2
for entry in $models; do
  name=${entry%%:*}
  measure models "$name" "$models_dir/$name/model.onnx" "$models_dir/$name/test_data_set_0" "${entry##*:}"
done
if [ "$zoo" = 1 ]; then
  echo "kiln zoo, batch 1 (repeat counts: $zoo_models)" >&2
  for entry in $zoo_models; do
    name=${entry%%:*}
    mkdir -p "$work/zoo/$name"
    if ! "$kiln" zoo "$name" --batch 1 -o "$work/zoo/$name/model.onnx" >"$work/$name.zoo.log" 2>&1; then
      for t in 1 2; do row zoo "$name" $t "" "" "kiln zoo failed"; done
      continue
    fi
    # Seeded inputs written by time_model.mjs (a 1-run ORT pass); both engines then read the same files.
    node "$time_ort" "$work/zoo/$name/model.onnx" "$work/zoo/$name/inputs" 1 1 --warmup 0 --make-inputs 1 >/dev/null
    measure zoo "$name" "$work/zoo/$name/model.onnx" "$work/zoo/$name/inputs" "${entry##*:}"
    rm -rf "$work/zoo/$name" "$work/pkg/$name"  # up to 440 MB of weights each
  done
fi
if [ -n "$npm_models" ]; then
  echo "npm models (repeat counts: $npm_models)" >&2
  for entry in $npm_models; do
    name=${entry%%:*}
    model=$("$root/scripts/fetch-npm-model.sh" "$name")
    read -r -a run_flags <<<"$(awk -F'\t' -v n="$name" '$1 == n { print $5 }' "$root/tests/models/npm_models.tsv")"
    # Seeded inputs, frozen ones and literal ones (--input sr=8000) included, in the model's input order.
    "$kiln" run "$model" "${run_flags[@]}" --seed 1 --save-inputs "$work/npm/$name" --print 0 >/dev/null
    compile_flags=()  # the run flags but --input, which only a run takes
    for (( k = 0; k < ${#run_flags[@]}; k++ )); do
      if [ "${run_flags[k]}" = --input ]; then k=$(( k + 1 )); else compile_flags+=("${run_flags[k]}"); fi
    done
    measure npm "$name" "$model" "$work/npm/$name" "${entry##*:}"
    compile_flags=()
  done
fi
elapsed=$(( $(date +%s) - start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# The markdown. A hand-written "## Reading" section of the previous file is carried over.
reading=""
if [ -f "$out" ] && grep -q '^## Reading' "$out"; then reading=$(sed -n '/^## Reading/,$p' "$out"); fi
rev=$(git -C "$root" rev-parse --short HEAD)
git -C "$root" diff --quiet HEAD 2>/dev/null || rev="$rev (with uncommitted changes)"
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
header() {
  if [ -n "$records_dir" ]; then
    echo "| model | threads | runs | kiln untuned ms | kiln tuned ms | ORT ms | tuned kiln/ORT | tuned speedup | tuned speedup (medians) | outputs vs ORT (max abs diff) |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    return
  fi
  echo "| model | threads | runs | kiln ms | ORT ms | kiln/ORT | outputs vs ORT (max abs diff) |"
  echo "|---|---:|---:|---:|---:|---:|---|"
}
{
  echo "# kiln vs ONNX Runtime: latency"
  echo
  if [ -n "$records_dir" ]; then
    echo "Tuned kiln (\`kiln compile --target host --records DIR/NAME.json\`, records from \`bench/tune_models.sh\`)"
    echo "and untuned kiln (default schedule) against ONNX Runtime 1.30.0 (npm"
  else
    echo "Untuned kiln (default schedule, \`kiln compile --target host\`) against ONNX Runtime 1.30.0 (npm"
  fi
  echo "onnxruntime-node, CPU execution provider, all graph optimizations), batch 1: the fastest of \"runs\""
  echo "timed runs, taken in 5 turns that alternate between the engines (bench/interleave.py), so that all"
  echo "see the same moments of this shared machine, whose speed drifts by up to 1.7x for seconds at a time."
  echo "The fastest run is the least disturbed one; \"tuned speedup (medians)\" is the same ratio from the"
  echo "medians of the turns. kiln/ORT < 1 means kiln is faster."
  echo
  echo "- command: \`$cmdline\` (from the repository root, after building kiln)"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); took ${elapsed} s"
  echo "- machine: $cpu, $(nproc) cores ($(lscpu | sed -n 's/^Thread(s) per core:[[:space:]]*/threads per core: /p')); load average $load_start at start, $load_end at end"
  echo "- kiln revision: $rev"
  echo "- kiln: the package's runner times \`<m>_run\` alone (threads > 1: the package's pthread pool); one untimed warm-up run per turn."
  echo "- ORT: \`bench/ort/time_model.mjs\`, intraOpNumThreads = threads, 3 warm-up runs per turn, then"
  echo "  timed \`session.run\` calls, which include the node binding's overhead (tens of microseconds)."
  echo "- outputs: ORT's outputs are compared with kiln's (tuned where tuned), |kiln - ort| <= 1e-4 + 1e-3 |ort|."
  echo
  echo "## Models (../shared/models, test_data_set_0 inputs)"
  echo
  header
  cat "$work/models.md"
  echo
  echo "Geometric mean of kiln/ORT: $(geomean models 1) at 1 thread, $(geomean models 2) at 2 threads."
  if [ "$zoo" = 1 ] && [ -f "$work/zoo.md" ]; then
    echo
    echo "## Ansor paper networks (\`kiln zoo NAME --batch 1\`, seeded random weights and inputs)"
    echo
    header
    cat "$work/zoo.md"
    echo
    echo "Geometric mean of kiln/ORT: $(geomean zoo 1) at 1 thread, $(geomean zoo 2) at 2 threads."
  fi
  if [ -f "$work/npm.md" ]; then
    echo
    echo "## Real models from npm packages (tests/models/npm_models.tsv: input shapes and frozen inputs from the table, seeded inputs)"
    echo
    header
    cat "$work/npm.md"
    echo
    echo "Geometric mean of kiln/ORT: $(geomean npm 1) at 1 thread, $(geomean npm 2) at 2 threads."
  fi
  echo
  echo "Compile time (\`kiln compile\`, s): $(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }' "$work/compile_s.txt")."
  if [ -n "$reading" ]; then echo; echo "$reading"; fi
} >"$out"
echo "wrote $out (${elapsed} s)" >&2
