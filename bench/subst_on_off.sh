#!/usr/bin/env bash
# bench/subst_on_off.sh [--threads "1 2"] [--rounds R] [--tuned TRIALS] [--out FILE] MODEL ...
#
# Graph substitutions (issue 20, `kiln compile --subst`) off and on, side by side in one run: each
# MODEL (a `kiln zoo` name or a model under ../shared/models) is compiled without and with --subst
# and the two packages are timed in alternating turns (bench/before_after.sh, interleave.py).
# Untuned by default. With --tuned TRIALS, each model is first tuned into its own records file
# (build/bench/subst/records/): once without substitutions, then twice with --subst (both sides of
# the roofline search's rewrites, then those of the search ranked by the first records;
# toolchain/subst_tasks.h), TRIALS per task each time; both packages compile with those records, and
# the search ranks graphs by them. A second table gives what the search did on each model: rewrites
# kept, the estimate before and after (the roofline, or the records when tuned), graphs expanded and
# the optimizer's own run time (from `kiln dump --dump-after subst`). Not part of ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
out=/dev/stdout
args=()
models=()
tuned=0
while [ $# -gt 0 ]; do
  case $1 in
    --threads|--rounds) args+=("$1" "$2"); shift ;;
    --tuned) tuned=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "subst_on_off.sh: unknown argument $1" >&2; exit 2 ;;
    *) models+=("$1") ;;
  esac
  shift
done
[ ${#models[@]} -gt 0 ] || { echo "subst_on_off.sh: name at least one model" >&2; exit 2; }
work=$root/build/bench/subst
mkdir -p "$work/records"
# Where before_after.sh finds MODEL (the same rules), and the records file of that path.
model_path() {
  if [ -d "$root/../shared/models/$1" ]; then find "$root/../shared/models/$1" -name '*.onnx' | sort | head -n 1
  else echo "$root/build/bench/before_after/$1.onnx"; fi
}
records_of() { echo "$work/records/$(echo "$1" | md5sum | cut -c1-16).jsonl"; }
if [ "$tuned" -gt 0 ]; then
  mkdir -p "$root/build/bench/before_after"
  for name in "${models[@]}"; do
    model=$(model_path "$name")
    [ -d "$root/../shared/models/$name" ] || "$kiln" zoo "$name" --batch 1 -o "$model" >/dev/null
    records=$(records_of "$model")
    rm -f "$records"
    for subst in "" --subst --subst; do
      echo "  $name: kiln tune $subst --trials-per-task $tuned" >&2
      "$kiln" tune "$model" $subst --target host --records "$records" --trials-per-task "$tuned" --plain >/dev/null
    done
  done
fi
# "before" and "after" are kiln without and with --subst on every compile, with the model's records
# when tuned.
wrapper() {
  cat >"$work/$1" <<WRAP
#!/usr/bin/env bash
if [ "\$1" = compile ]; then
  shift
  records=""
  [ "$tuned" -gt 0 ] && records="--records $work/records/\$(echo "\$1" | md5sum | cut -c1-16).jsonl"
  exec "$kiln" compile $2 "\$@" \$records
fi
exec "$kiln" "\$@"
WRAP
  chmod +x "$work/$1"
}
wrapper kiln_off ""
wrapper kiln_subst --subst
KILN="$work/kiln_subst" KILN_BEFORE="$work/kiln_off" "$root/bench/before_after.sh" "${args[@]}" --out "$work/times.md" "${models[@]}"
{
  sed -e '1s/before ms | after ms/off ms | on ms/' "$work/times.md"
  echo
  echo "| model | rewrites | estimate off -> on | graphs expanded | optimizer s |"
  echo "|---|---:|---|---:|---:|"
  for name in "${models[@]}"; do
    model=$(model_path "$name")
    records=()
    [ "$tuned" -gt 0 ] && records=(--records "$(records_of "$model")")
    line=$("$kiln" compile "$model" --subst "${records[@]}" -o "$work/dump" --dump-after subst | sed -n 2p)
    # "N rewrites, estimated A ms -> B ms (E graphs expanded, G generated, F failed, S seen before, T s)"
    awk -v m="$name" '{ gsub(/[(),]/, ""); printf "| %s | %s | %s -> %s ms | %s | %s |\n", m, $1, $4, $7, $9, $(NF - 1) }' <<<"$line"
  done
} >"$out"
