#!/usr/bin/env bash
# bench/tune_ops.sh [--trials N] [--ops "NAME ..."] [--out FILE] [--threads T]
#
# Single operators, tuned by `kiln tune` (N trials, default 200), against untuned kiln, OpenBLAS sgemm
# (libopenblas-dev, OPENBLAS_NUM_THREADS=T) and this core's FMA peak (bench/native/fma_peak.c), measured
# side by side in one run. For each op: `kiln zoo` writes it as ONNX, `kiln compile` builds it untuned,
# `kiln tune` tunes it (records and tuning curve kept under build/bench/ops/), `kiln compile --records`
# builds it tuned; untuned, tuned and OpenBLAS are timed in alternating turns (the fastest run of each).
# An op in the blocked layout is three tasks (reorders into and out of the layout around it); the searched
# best is the slowest task's, the op's own. Ops: matmul1024 (1024^3), matmul512, bert_ffn (128x768x3072), resnet_conv3x3 (1x64x56x56, 64 3x3
# filters, padding 1), depthwise (1x128x56x56, 3x3, padding 1), attention_av (BERT-base's attention
# weights x values: 12 heads of 128x128 x 128x64, both inputs), conv_to_rgb (1x64x64x64 -> 3 channels,
# 3x3, padding 1: an image generator's last layer, whose 3 channels make a poor vector). Writes a markdown section to --out
# (default: stdout). Needs build/bin/kiln ($KILN; $KILN_ZOO writes the models, for a kiln older than
# the zoo op); x86-64 with AVX-512 for the peak. Not part of ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
zoo_kiln=${KILN_ZOO:-$kiln}
trials=200
threads=1
ops="matmul1024 matmul512 bert_ffn resnet_conv3x3 depthwise"
out=/dev/stdout
while [ $# -gt 0 ]; do
  case $1 in
    --trials) trials=$2; shift ;;
    --ops) ops=$2; shift ;;
    --out) out=$2; shift ;;
    --threads) threads=$2; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "tune_ops.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$kiln" ] || { echo "tune_ops.sh: $kiln not found; build kiln first" >&2; exit 2; }
work=$root/build/bench/ops
mkdir -p "$work"
cc -O2 -march=native "$root/bench/native/fma_peak.c" -o "$work/fma_peak"
cc -O2 "$root/bench/native/sgemm_openblas.c" -lopenblas -o "$work/sgemm_openblas"

# zoo arguments, FLOPs and (for matmuls) the sgemm shape of each op.
declare -A zoo_args flops gemm
zoo_args[matmul1024]="matmul --m 1024 --n 1024 --k 1024"; flops[matmul1024]=$((2 * 1024 * 1024 * 1024)); gemm[matmul1024]="1024 1024 1024"
zoo_args[matmul512]="matmul --m 512 --n 512 --k 512"; flops[matmul512]=$((2 * 512 * 512 * 512)); gemm[matmul512]="512 512 512"
zoo_args[bert_ffn]="matmul --m 128 --n 3072 --k 768"; flops[bert_ffn]=$((2 * 128 * 3072 * 768)); gemm[bert_ffn]="128 3072 768"
zoo_args[resnet_conv3x3]="conv2d --in-channels 64 --out-channels 64 --kernel 3 --padding 1 --size 56"
flops[resnet_conv3x3]=$((2 * 64 * 56 * 56 * 64 * 9))
zoo_args[depthwise]="depthwise --in-channels 128 --kernel 3 --padding 1 --size 56"
flops[depthwise]=$((2 * 128 * 56 * 56 * 9))
zoo_args[attention_av]="batch_matmul --batch 12 --m 128 --k 128 --n 64"; flops[attention_av]=$((2 * 12 * 128 * 128 * 64))
zoo_args[conv_to_rgb]="conv2d --in-channels 64 --out-channels 3 --kernel 3 --padding 1 --size 64"
flops[conv_to_rgb]=$((2 * 3 * 64 * 64 * 64 * 9))

gflops() { awk -v f="$1" -v ms="$2" 'BEGIN { if (ms == "" || ms <= 0) print "-"; else printf "%.1f", f / (ms * 1e6) }'; }
pct() { awk -v g="$1" -v p="$2" 'BEGIN { if (g == "-" || p <= 0) print "-"; else printf "%.0f%%", 100 * g / p }'; }

peak=$("$work/fma_peak" | sed -n 's/^peak: \([0-9.]*\).*/\1/p')
peak_t=$(awk -v p="$peak" -v t="$threads" 'BEGIN { printf "%.1f", p * t }')
{
  echo "### Single operators: $trials trials each, $threads thread(s)"
  echo
  echo "FMA peak of one core, measured in the same run: $peak GFLOPS (x $threads thread(s) = $peak_t)."
  echo
  echo "Untuned: the default schedule. Searched: the fastest program the search found (its record's time, as"
  echo 'measured while tuning). Tuned package: `kiln compile --records`, which uses the searched program only'
  echo 'where it beat the default schedule (also measured while tuning). Times: the fastest `kiln run` of 5 turns'
  echo 'that alternate untuned, tuned and OpenBLAS (bench/interleave.py).'
  echo
  echo "| op | untuned ms | searched best ms | searched GFLOPS | % of peak | tuned package ms | tuned/untuned speedup | OpenBLAS GFLOPS | measured/s |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$work/ops.md"
for op in $ops; do
  m=$work/$op.onnx rec=$work/$op.records.json
  # shellcheck disable=SC2086
  "$zoo_kiln" zoo ${zoo_args[$op]} -o "$m" >/dev/null
  rm -f "$rec"
  "$kiln" compile "$m" --target host -o "$work/$op.untuned" --name op >/dev/null
  "$kiln" tune "$m" --target host --records "$rec" --trials "$trials" --threads "$threads" --plain \
    >"$work/$op.tune.log" 2>&1 || { echo "tune_ops.sh: $op: kiln tune failed (see $work/$op.tune.log)" >&2; continue; }
  "$kiln" compile "$m" --target host --records "$rec" -o "$work/$op.tuned" --name op >/dev/null
  repeat=$(awk -v f="${flops[$op]}" 'BEGIN { r = int(2e10 / f); print (r < 5 ? 5 : (r > 200 ? 200 : r)) }')
  # Untuned, tuned and OpenBLAS in alternating turns (bench/interleave.py); the fastest run of each.
  per=$(( repeat / 5 > 1 ? repeat / 5 : 1 ))
  contestants=("untuned=$(printf '%q ' "$kiln" run "$work/$op.untuned" --repeat "$per" --threads "$threads" --print 0)"
               "tuned=$(printf '%q ' "$kiln" run "$work/$op.tuned" --repeat "$per" --threads "$threads" --print 0)")
  [ -n "${gemm[$op]:-}" ] && contestants+=("blas=OPENBLAS_NUM_THREADS=$threads $(printf '%q ' "$work/sgemm_openblas" ${gemm[$op]} "$per")")
  times=$(python3 "$root/bench/interleave.py" --rounds 5 "${contestants[@]}")
  fastest() { awk -v n="$1" '$1 == n && $2 == "min" { printf "%.3f", $3 }' <<<"$times"; }
  u=$(fastest untuned); t=$(fastest tuned)
  blas="-"
  [ -n "${gemm[$op]:-}" ] && blas=$(gflops "${flops[$op]}" "$(fastest blas)")
  s=$(python3 -c '
import json, sys
best = {}  # task key -> the best searched time
for line in open(sys.argv[1]):
    try: j = json.loads(line)
    except ValueError: continue
    costs, err = j["r"][0], j["r"][1]
    if err == 0 and costs and not j.get("kiln_default") and "kiln_final" not in j:
        c, key = sum(costs) / len(costs), j["i"][0][0]
        best[key] = min(c, best.get(key, c))
# The op is the slowest task; the others are layout reorders around it.
print("%.3f" % (max(best.values()) * 1e3) if best else "")' "$rec")
  sg=$(gflops "${flops[$op]}" "$s")
  rate=$(sed -n 's/.*| \([0-9.]*\) measured\/s |.*/\1/p' "$work/$op.tune.log" | tail -n 1)
  speedup=$(awk -v u="$u" -v t="$t" 'BEGIN { if (t <= 0) print "-"; else printf "%.2fx", u / t }')
  echo "| $op | $u | ${s:--} | $sg | $(pct "$sg" "$peak_t") | $t | $speedup | $blas | ${rate:--} |" >>"$work/ops.md"
  echo "  $op: untuned $u ms, searched $s ms ($sg GFLOPS), tuned package $t ms, OpenBLAS $blas GFLOPS" >&2
done
# Search efficiency: best-so-far against trials and candidates per second, from the records.
effs=()
for op in $ops; do [ -f "$work/$op.records.json" ] && effs+=("${flops[$op]}=$work/$op.records.json"); done
{
  echo
  echo "#### Search efficiency (best searched program so far vs programs measured; GF = GFLOPS)"
  echo
  python3 "$root/bench/search_efficiency.py" "${effs[@]}"
} >>"$work/ops.md"
cat "$work/ops.md" >"$out"
