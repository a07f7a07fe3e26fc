#!/usr/bin/env bash
# bench/subst_on_off.sh [--threads "1 2"] [--rounds R] [--out FILE] MODEL ...
#
# Graph substitutions (issue 20, `kiln compile --subst`) off and on, side by side in one run: each
# MODEL (a `kiln zoo` name or a model under ../shared/models) is compiled untuned without and with
# --subst and the two packages are timed in alternating turns (bench/before_after.sh, interleave.py).
# A second table gives what the search did on each model: rewrites kept, the roofline estimate before
# and after, graphs expanded and the optimizer's own run time (from `kiln dump --dump-after subst`).
# Not part of ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
out=/dev/stdout
args=()
models=()
while [ $# -gt 0 ]; do
  case $1 in
    --threads|--rounds) args+=("$1" "$2"); shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "subst_on_off.sh: unknown argument $1" >&2; exit 2 ;;
    *) models+=("$1") ;;
  esac
  shift
done
[ ${#models[@]} -gt 0 ] || { echo "subst_on_off.sh: name at least one model" >&2; exit 2; }
work=$root/build/bench/subst
mkdir -p "$work"
# "after" is kiln with --subst on every compile.
cat >"$work/kiln_subst" <<WRAP
#!/usr/bin/env bash
if [ "\$1" = compile ]; then shift; exec "$kiln" compile --subst "\$@"; fi
exec "$kiln" "\$@"
WRAP
chmod +x "$work/kiln_subst"
KILN="$work/kiln_subst" KILN_BEFORE="$kiln" "$root/bench/before_after.sh" "${args[@]}" --out "$work/times.md" "${models[@]}"
{
  sed -e '1s/before ms | after ms/off ms | on ms/' "$work/times.md"
  echo
  echo "| model | rewrites | estimate off -> on | graphs expanded | optimizer s |"
  echo "|---|---:|---|---:|---:|"
  for name in "${models[@]}"; do
    model=$root/build/bench/before_after/$name.onnx
    [ -f "$model" ] || model=$(find "$root/../shared/models/$name" -name '*.onnx' | sort | head -n 1)
    line=$("$kiln" dump "$model" --subst --dump-after subst | sed -n 2p)
    # "N rewrites, estimated A ms -> B ms (E graphs expanded, G generated, F failed, S seen before, T s)"
    awk -v m="$name" '{ gsub(/[(),]/, ""); printf "| %s | %s | %s -> %s ms | %s | %s |\n", m, $1, $4, $7, $9, $(NF - 1) }' <<<"$line"
  done
} >"$out"
