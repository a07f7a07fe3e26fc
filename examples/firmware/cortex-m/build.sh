#!/usr/bin/env bash
# build.sh MODEL.onnx TARGET OUT_DIR [KILN_ARGS...]: the bare-metal firmware example for one model on a
# Cortex-M target. KILN_ARGS (e.g. --dim N=1 for a model with a free batch) go to kiln compile and run.
#   1. kiln compile MODEL --target TARGET        -> OUT_DIR/pkg (libnet.a, net.h, kiln_board.ld, startup)
#   2. the reference interpreter's seeded input  -> OUT_DIR/input.h (the firmware's test vector, in flash)
#   3. main.c + the package, linked with the target's compiler and newlib -> OUT_DIR/firmware.elf
#   4. qemu-system-arm boots it (the target's run_prefix) and the firmware prints every output value
# Needs arm-none-eabi-gcc with newlib and qemu-system-arm (Debian: gcc-arm-none-eabi,
# libnewlib-arm-none-eabi, qemu-system-arm). KILN names the kiln binary (default: build/bin/kiln, else PATH).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 MODEL.onnx TARGET OUT_DIR [KILN_ARGS...]" >&2; exit 2; }
model=$1 target=$2 out=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
kiln=${KILN:-$here/../../../build/bin/kiln}
[ -x "$kiln" ] || kiln=kiln
mkdir -p "$out"
field() { "$kiln" targets "$target" | sed -n "s/^$1  *//p"; }
cc=$(field cc)
run_prefix=$(field run_prefix)
[ -n "$(field bare_metal.sram)" ] || { echo "$0: $target is not a bare-metal target" >&2; exit 2; }

"$kiln" compile "$model" -o "$out/pkg" --name net --target "$target" "$@" >/dev/null
size=$(awk '$2 == "NET_INPUT_SIZES" { gsub(/[{}]/, "", $3); print $3 }' "$out/pkg/net.h")
# The reference's seeded input: raw_data is the last field of the serialized TensorProto, so the
# file ends with the tensor's bytes.
"$kiln" run "$model" --save-inputs "$out/inputs" --print 0 "$@" >/dev/null
{
  echo "static const uint8_t firmware_input_bytes[] = {"
  tail -c "$size" "$out/inputs/input_0.pb" | od -An -v -tx1 | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'
  echo "};"
} >"$out/input.h"

# shellcheck disable=SC2086  # cc and run_prefix are command lines
$cc -std=c99 -O2 -Wall -Wextra -Werror -I"$out/pkg" -I"$out" '-DMODEL_HEADER="net.h"' -DMODEL=net -DMODEL_UPPER=NET \
  '-DINPUT_HEADER="input.h"' "$here/main.c" "$out/pkg/kiln_cortex_m_startup.c" "$out/pkg/libnet.a" \
  --specs=rdimon.specs -nostartfiles -T "$out/pkg/kiln_board.ld" -Wl,--no-warn-execstack -Wl,-Map="$out/firmware.map" \
  -lm -o "$out/firmware.elf"
arm-none-eabi-size "$out/firmware.elf"
# shellcheck disable=SC2086
$run_prefix -display none -monitor none -serial null -semihosting-config enable=on,target=native,arg=firmware \
  -kernel "$out/firmware.elf"
