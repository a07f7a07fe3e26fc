#!/usr/bin/env bash
# KILN_BEFORE=/path/to/older/kiln bench/before_after.sh [--threads "1 2"] [--rounds R] [--target T] [--out FILE]
#                                                      MODEL ...
#
# One change's before/after on whole models, as one run on one machine state: every MODEL is compiled
# (--target host, or T) by KILN_BEFORE and by this tree's kiln (or $KILN), and the two packages are timed in
# alternating turns (bench/interleave.py) at each thread count, on the same seeded inputs. MODEL is a
# `kiln zoo` network name (resnet50, mobilenet_v2, ...) or the name of a model under ../shared/models
# (its first .onnx file; its symbolic dimensions must be fixed). KILN_BEFORE may be a wrapper script
# (e.g. one that sets KILN_TARGETS_DIR to compare target settings). Prints a markdown table; the
# speedup is before/after of the fastest runs. Not part of ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
before=${KILN_BEFORE:?set KILN_BEFORE to the kiln binary (or wrapper) to compare against}
models_dir=${MODELS_DIR:-$root/../shared/models}
threads="1"
rounds=5
target=host
out=/dev/stdout
models=()
while [ $# -gt 0 ]; do
  case $1 in
    --threads) threads=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --target) target=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "before_after.sh: unknown argument $1" >&2; exit 2 ;;
    *) models+=("$1") ;;
  esac
  shift
done
[ ${#models[@]} -gt 0 ] || { echo "before_after.sh: name at least one model" >&2; exit 2; }
work=$root/build/bench/before_after
mkdir -p "$work"
{
  echo "| model | threads | before ms | after ms | speedup |"
  echo "|---|---:|---:|---:|---:|"
} >"$work/table.md"
for name in "${models[@]}"; do
  model=$work/$name.onnx
  if [ -d "$models_dir/$name" ]; then
    model=$(find "$models_dir/$name" -name '*.onnx' | sort | head -n 1)
  elif ! "$kiln" zoo "$name" --batch 1 -o "$model" >/dev/null 2>"$work/$name.zoo.log"; then
    echo "before_after.sh: $name is neither a kiln zoo network nor a model in $models_dir" >&2
    exit 2
  fi
  "$before" compile "$model" --target "$target" -o "$work/$name.before" --name model >/dev/null
  "$kiln" compile "$model" --target "$target" -o "$work/$name.after" --name model >/dev/null
  # About two seconds of runs per turn, from one warm-up-and-time probe of the new package.
  probe=$("$kiln" run "$work/$name.after" --repeat 3 --print 0 | sed -n 's/^median: \([0-9.]*\) ms.*/\1/p')
  repeat=$(awk -v ms="$probe" 'BEGIN { r = int(2000 / (ms > 0 ? ms : 1)); print (r < 3 ? 3 : (r > 500 ? 500 : r)) }')
  for t in $threads; do
    times=$(python3 "$root/bench/interleave.py" --rounds "$rounds" \
      "before=$(printf '%q ' "$kiln" run "$work/$name.before" --repeat "$repeat" --threads "$t" --print 0)" \
      "after=$(printf '%q ' "$kiln" run "$work/$name.after" --repeat "$repeat" --threads "$t" --print 0)")
    fastest() { awk -v n="$1" '$1 == n && $2 == "min" { printf "%.3f", $3 }' <<<"$times"; }
    b=$(fastest before)
    a=$(fastest after)
    speedup=$(awk -v b="$b" -v a="$a" 'BEGIN { if (a == "" || b == "" || a <= 0) print "-"; else printf "%.2fx", b / a }')
    echo "| $name | $t | ${b:-fail} | ${a:-fail} | $speedup |" >>"$work/table.md"
    echo "  $name T=$t: before ${b:-fail} ms, after ${a:-fail} ms ($speedup)" >&2
  done
done
cat "$work/table.md" >"$out"
