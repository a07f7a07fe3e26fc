#!/usr/bin/env bash
# The Cortex-M firmware example (examples/firmware/cortex-m/) as a user builds it, on QEMU's MPS2 boards:
#   a) the library needs no malloc, stdio or threads, and links with hard-float firmware;
#   b) the firmware prints the reference interpreter's outputs (rtol 1e-4, atol 1e-5; with EXACT=1 the
#      very same values, for int8 models, whose reference ONNX Runtime matches exactly) on cortex-m4 and -m7;
#   c) the weights sit in flash and the arena in SRAM (the linked firmware's symbols);
#   d) `kiln run PKG` boots the same package under qemu-system-arm and agrees with the reference too;
#   e) the soft-float-ABI variant (a target file of one's own: triple thumbv7em-none-eabi, -mfloat-abi=softfp)
#      agrees too, its library says so in its build attributes, and `kiln run` finds that file.
# usage: cortex_m_test.sh KILN SOURCE_DIR WORK_DIR MODEL.onnx|zoo:NAME [KILN_ARGS...]
# Exits 77 (skipped) without arm-none-eabi-gcc or qemu-system-arm: scripts/install-deps.sh installs both.
set -euo pipefail
KILN=$1 SRC=$2 WORK=$3 MODEL=$4
shift 4
for tool in arm-none-eabi-gcc arm-none-eabi-nm qemu-system-arm; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool (scripts/install-deps.sh installs it)"; exit 77; }
done
rm -rf "$WORK" && mkdir -p "$WORK"
die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
if [[ $MODEL == zoo:* ]]; then
  "$KILN" zoo "${MODEL#zoo:}" -o "$WORK/${MODEL#zoo:}.onnx"
  MODEL=$WORK/${MODEL#zoo:}.onnx
fi
rtol=1e-4 atol=1e-5
[ "${EXACT:-0}" = 1 ] && rtol=0 atol=0

# The reference's float outputs, one value per line.
"$KILN" run "$MODEL" --print 100000 "$@" | awk '/^output / { on = 1; next } /^median/ { on = 0 } on { for (i = 1; i <= NF; ++i) print $i }' \
  >"$WORK/reference.txt"
[ -s "$WORK/reference.txt" ] || die "the reference printed no values"
# same_values FILE: FILE's values equal the reference's within rtol, atol.
same_values() {
  paste "$1" "$WORK/reference.txt" | awk -v file="$1" -v rtol="$rtol" -v atol="$atol" '
    NF != 2 { print file ": value " NR " has no counterpart in the reference"; bad = 1; exit }
    { d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (d > atol + rtol * m) { print file ": value " NR ": " $1 ", reference " $2; bad = 1 } }
    END { exit bad }' || die "$1 differs from the reference"
  [ "$(wc -l <"$1")" -eq "$(wc -l <"$WORK/reference.txt")" ] || die "$1: $(wc -l <"$1") values, the reference has $(wc -l <"$WORK/reference.txt")"
}

for target in cortex-m4 cortex-m7; do
  out=$WORK/$target
  echo "== $target: firmware example"
  KILN=$KILN "$SRC/examples/firmware/cortex-m/build.sh" "$MODEL" "$target" "$out" "$@" >"$out.log" 2>&1 ||
    { cat "$out.log"; die "$target: the firmware example failed"; }
  if arm-none-eabi-nm -u "$out/pkg/libnet.a" | grep -E '\b(malloc|calloc|free|printf|fopen|pthread_[a-z_]+)\b'; then
    die "$target: libnet.a references malloc, stdio or threads"
  fi
  sed -n '/^output 0: /,$p' "$out.log" | grep -v '^output ' >"$out.values"
  same_values "$out.values"
  # Flash and SRAM from the target file; the weights are local symbols named net_weightN.
  flash_end=$(( $("$KILN" targets "$target" | sed -n 's/^bare_metal.flash *\(0x[0-9a-f]*\) + \([0-9]*\).*/\1 + \2/p') ))
  sram=$("$KILN" targets "$target" | sed -n 's/^bare_metal.sram *\(0x[0-9a-f]*\) .*/\1/p')
  arm-none-eabi-nm "$out/firmware.elf" >"$out.syms"
  weights=0
  while read -r addr _ name; do
    case $name in net_weight*) weights=$((weights + 1)); (( 0x$addr < flash_end )) || die "$target: $name at 0x$addr, not in flash";; esac
  done <"$out.syms"
  [ "$weights" -gt 0 ] || die "$target: no weight symbols in the firmware"
  arena=$(awk '$3 == "arena" { print $1 }' "$out.syms")
  [ -n "$arena" ] && (( 0x$arena >= sram )) || die "$target: the arena at 0x${arena:-?} is not in SRAM"
  echo "$target: $(wc -l <"$out.values") values equal the reference's; $weights weights in flash, the arena at 0x$arena"

  echo "== $target: kiln run"
  "$KILN" run "$out/pkg" --print 100000 "$@" |
    awk '/^output / { on = 1; next } /^(median|instructions)/ { on = 0 } on { for (i = 1; i <= NF; ++i) print $i }' >"$out.run"
  same_values "$out.run"
done

echo "== cortex-m4 with the softfp float ABI"
sed -e 's/^triple = "thumbv7em-none-eabihf"/triple = "thumbv7em-none-eabi"/' -e 's/-mfloat-abi=hard/-mfloat-abi=softfp/' \
  "$SRC/targets/cortex-m4.toml" >"$WORK/m4-softfp.toml"
"$KILN" compile "$MODEL" -o "$WORK/softfp" --name net --target "$WORK/m4-softfp.toml" "$@" >/dev/null
mkdir -p "$WORK/softfp_objects" && (cd "$WORK/softfp_objects" && arm-none-eabi-ar x "$WORK/softfp/libnet.a")
attributes=$(arm-none-eabi-readelf -A "$WORK/softfp_objects/net.o")
grep -q 'Tag_FP_arch: VFPv4' <<<"$attributes" || die "softfp: the library does not use the FPU"
if grep -q 'Tag_ABI_VFP_args: VFP registers' <<<"$attributes"; then die "softfp: the library passes floats in VFP registers"; fi
"$KILN" run "$WORK/softfp" --print 100000 "$@" |
  awk '/^output / { on = 1; next } /^(median|instructions)/ { on = 0 } on { for (i = 1; i <= NF; ++i) print $i }' >"$WORK/softfp.run"
same_values "$WORK/softfp.run"
echo "PASS"
