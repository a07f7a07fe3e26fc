#!/usr/bin/env bash
# bench/layers.sh [--layers "NAME ..."] [--threads T] [--rounds R] [--out FILE]
#
# Single layers compiled untuned (the default schedule), as GFLOPS and % of this core's FMA peak
# (bench/native/fma_peak.c, measured in the same run), beside OpenBLAS sgemm for the matmul. With
# KILN_BEFORE=/path/to/older/kiln, the same layers compiled by that binary are timed in the same
# alternating turns (bench/interleave.py), so a change's before/after is one run on one machine state.
# Layers: ResNet-50's 3x3 convs at 56x56 (64 ch), 14x14 (256 ch) and 7x7 (512 ch), a 1x1 conv
# (256 -> 64 at 56x56), a depthwise 3x3 (128 ch at 56x56), dcgan's stride-2 ConvTranspose (128 -> 64,
# kernel 4, 16x16 -> 32x32; FLOPs counted as the ConvTranspose's own: every input pixel times the whole
# kernel), matmul 1024^3, YOLOX's 13x13 SPP max pool (stride 1, pad 6, 128 ch at 13x13; its "FLOPs" are
# the comparisons, one per tap, so its % of the FMA peak only compares runs). A layer's time includes
# converting its NCHW input and output to and from the blocked layout, which a network does once, not per
# layer: a short reduction's % understates its loop nest (bench/parallel_profile.sh times the nest
# alone). Not part of ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
before=${KILN_BEFORE:-}
layers="conv3x3_56 conv3x3_14 conv3x3_7 conv1x1_56 depthwise deconv_16 matmul1024 maxpool13"
threads=1
rounds=5
out=/dev/stdout
while [ $# -gt 0 ]; do
  case $1 in
    --layers) layers=$2; shift ;;
    --threads) threads=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "layers.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$kiln" ] || { echo "layers.sh: $kiln not found; build kiln first" >&2; exit 2; }
work=$root/build/bench/layers
mkdir -p "$work"
cc -O2 -march=native "$root/bench/native/fma_peak.c" -o "$work/fma_peak"
have_blas=0
cc -O2 "$root/bench/native/sgemm_openblas.c" -lopenblas -o "$work/sgemm_openblas" 2>/dev/null && have_blas=1

declare -A zoo_args flops
zoo_args[conv3x3_56]="conv2d --in-channels 64 --out-channels 64 --kernel 3 --padding 1 --size 56"
flops[conv3x3_56]=$((2 * 64 * 56 * 56 * 64 * 9))
zoo_args[conv3x3_14]="conv2d --in-channels 256 --out-channels 256 --kernel 3 --padding 1 --size 14"
flops[conv3x3_14]=$((2 * 256 * 14 * 14 * 256 * 9))
zoo_args[conv3x3_7]="conv2d --in-channels 512 --out-channels 512 --kernel 3 --padding 1 --size 7"
flops[conv3x3_7]=$((2 * 512 * 7 * 7 * 512 * 9))
zoo_args[conv1x1_56]="conv2d --in-channels 256 --out-channels 64 --kernel 1 --padding 0 --size 56"
flops[conv1x1_56]=$((2 * 256 * 56 * 56 * 64))
zoo_args[depthwise]="depthwise --in-channels 128 --kernel 3 --padding 1 --size 56"
flops[depthwise]=$((2 * 128 * 56 * 56 * 9))
zoo_args[deconv_16]="conv_transpose2d --in-channels 128 --out-channels 64 --kernel 4 --stride 2 --padding 1 --size 16"
flops[deconv_16]=$((2 * 128 * 16 * 16 * 64 * 16))
zoo_args[matmul1024]="matmul --m 1024 --n 1024 --k 1024"
flops[matmul1024]=$((2 * 1024 * 1024 * 1024))
zoo_args[maxpool13]="maxpool2d --in-channels 128 --kernel 13 --padding 6 --size 13"
flops[maxpool13]=$((128 * 13 * 13 * 169))

gflops() { awk -v f="$1" -v ms="$2" 'BEGIN { if (ms == "" || ms <= 0) print "-"; else printf "%.1f", f / (ms * 1e6) }'; }
pct() { awk -v g="$1" -v p="$2" 'BEGIN { if (g == "-" || p <= 0) print "-"; else printf "%.0f%%", 100 * g / p }'; }

peak=$("$work/fma_peak" | sed -n 's/^peak: \([0-9.]*\).*/\1/p')
peak_t=$(awk -v p="$peak" -v t="$threads" 'BEGIN { printf "%.1f", p * t }')
{
  echo "### Single layers, untuned, $threads thread(s)"
  echo
  echo "- command: \`bench/layers.sh $*\`${before:+ with KILN_BEFORE=$before}"
  echo "- machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores; FMA peak of one core measured in this run: $peak GFLOPS"
  echo "- kiln revision: $(git -C "$root" rev-parse --short HEAD)"
  echo
  if [ -n "$before" ]; then
    echo "| layer | before ms | now ms | speedup | now GFLOPS | % of peak | OpenBLAS GFLOPS |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
  else
    echo "| layer | ms | GFLOPS | % of peak | OpenBLAS GFLOPS |"
    echo "|---|---:|---:|---:|---:|"
  fi
} >"$work/layers.md"
for layer in $layers; do
  m=$work/$layer.onnx
  # shellcheck disable=SC2086
  "$kiln" zoo ${zoo_args[$layer]} -o "$m" >/dev/null
  "$kiln" compile "$m" --target host -o "$work/$layer.now" --name op >/dev/null
  repeat=$(awk -v f="${flops[$layer]}" 'BEGIN { r = int(4e9 / f); print (r < 3 ? 3 : (r > 100 ? 100 : r)) }')
  contestants=("now=$(printf '%q ' "$kiln" run "$work/$layer.now" --repeat "$repeat" --threads "$threads" --print 0)")
  if [ -n "$before" ]; then
    "$before" compile "$m" --target host -o "$work/$layer.before" --name op >/dev/null
    contestants+=("before=$(printf '%q ' "$kiln" run "$work/$layer.before" --repeat "$repeat" --threads "$threads" --print 0)")
  fi
  if [ "$layer" = matmul1024 ] && [ $have_blas = 1 ]; then
    contestants+=("blas=OPENBLAS_NUM_THREADS=$threads $(printf '%q ' "$work/sgemm_openblas" 1024 1024 1024 "$repeat")")
  fi
  times=$(python3 "$root/bench/interleave.py" --rounds "$rounds" "${contestants[@]}")
  fastest() { awk -v n="$1" '$1 == n && $2 == "min" { printf "%.3f", $3 }' <<<"$times"; }
  now=$(fastest now)
  g=$(gflops "${flops[$layer]}" "$now")
  blas="-"
  [ "$layer" = matmul1024 ] && [ $have_blas = 1 ] && blas=$(gflops "${flops[$layer]}" "$(fastest blas)")
  if [ -n "$before" ]; then
    b=$(fastest before)
    speedup=$(awk -v b="$b" -v n="$now" 'BEGIN { if (n <= 0 || b == "") print "-"; else printf "%.2fx", b / n }')
    echo "| $layer | $b | $now | $speedup | $g | $(pct "$g" "$peak_t") | $blas |" >>"$work/layers.md"
  else
    echo "| $layer | $now | $g | $(pct "$g" "$peak_t") | $blas |" >>"$work/layers.md"
  fi
  echo "  $layer: $now ms ($g GFLOPS)" >&2
done
cat "$work/layers.md" >"$out"
