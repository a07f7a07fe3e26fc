#!/usr/bin/env bash
# kiln end to end on the model that ships in the repository (examples/tiny_cnn.onnx, written by
# `kiln zoo tiny_cnn`): summarise it, run the reference interpreter on a seeded input, compile it for
# this machine, for a Raspberry Pi 4 (aarch64-cortex-a72) and for a Cortex-M4 microcontroller without an OS
# (cortex-m4), link the firmware example (examples/firmware/main.c) against each package, run all three on
# the same input (AArch64 under qemu-aarch64, the Cortex-M4 firmware booted on qemu-system-arm's MPS2
# board), and check that they agree with the reference interpreter. Needs nothing outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh kiln >/dev/null   # the compiler (with its runtime sources) only; scripts/test.sh builds the rest
kiln=build/bin/kiln
model=examples/tiny_cnn.onnx
seed=7
arm=aarch64-cortex-a72
mcu=cortex-m4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { printf '\n== %s\n' "$*"; }
die() { printf 'demo: FAILED: %s\n' "$*" >&2; exit 1; }

step "kiln inspect $model --tasks"
$kiln inspect "$model" --tasks

step "kiln run $model --seed $seed   (reference interpreter, double precision)"
$kiln run "$model" --seed "$seed" --print 1000 --save-inputs "$tmp/inputs" | tee "$tmp/reference.txt"

step "kiln compile: host, $arm and $mcu"
$kiln compile "$model" -o "$tmp/pkg_host" --name tiny_cnn | tee "$tmp/compile_host.txt"
$kiln compile "$model" -o "$tmp/pkg_arm" --name tiny_cnn --target "$arm"
$kiln compile "$model" -o "$tmp/pkg_mcu" --name tiny_cnn --target "$mcu"
host=$(sed -n 's/.*(target \([^,]*\),.*/\1/p' "$tmp/compile_host.txt")  # the host's target, e.g. x86_64-avx2

step "the firmware example, linked against each package, on the same seeded input"
# The seeded input as the firmware's test vector: raw_data is the last field of the serialized
# TensorProto, so the file ends with the tensor's bytes (see tests/package/package_test.sh).
size=$(awk '$2 == "TINY_CNN_INPUT_IMAGE_SIZE" { print $3 }' "$tmp/pkg_host/tiny_cnn.h")
{
  echo "static const uint8_t firmware_input_bytes[] = {"
  tail -c "$size" "$tmp/inputs/input_0.pb" | od -An -v -tx1 | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'
  echo "};"
} >"$tmp/input_vector.h"
fw=(-std=c99 -O2 -I"$tmp" '-DFIRMWARE_INPUT_HEADER="input_vector.h"' examples/firmware/main.c)
echo "\$ cc -I pkg_host ... examples/firmware/main.c pkg_host/libtiny_cnn.a -lm"
cc "${fw[@]}" -I"$tmp/pkg_host" "$tmp/pkg_host/libtiny_cnn.a" -lm -o "$tmp/firmware_host"
"$tmp/firmware_host" | tee "$tmp/firmware_host.txt"
echo "\$ aarch64-linux-gnu-gcc -static -I pkg_arm ... pkg_arm/libtiny_cnn.a -lm; qemu-aarch64 -L /usr/aarch64-linux-gnu ..."
aarch64-linux-gnu-gcc -static "${fw[@]}" -I"$tmp/pkg_arm" "$tmp/pkg_arm/libtiny_cnn.a" -lm -o "$tmp/firmware_arm"
qemu-aarch64 -L /usr/aarch64-linux-gnu "$tmp/firmware_arm" | tee "$tmp/firmware_arm.txt"
# The same firmware on bare metal: the package's startup file and linker script place it on the board,
# newlib's semihosting library (rdimon) carries printf to the host (docs/cortex-m.md).
mcu_cc=$($kiln targets "$mcu" | sed -n 's/^cc  *//p')
mcu_run=$($kiln targets "$mcu" | sed -n 's/^run_prefix  *//p')
echo "\$ $mcu_cc ... pkg_mcu/kiln_cortex_m_startup.c pkg_mcu/libtiny_cnn.a -T pkg_mcu/kiln_board.ld --specs=rdimon.specs; $mcu_run ..."
# shellcheck disable=SC2086  # the target's compiler and emulator are command lines
$mcu_cc "${fw[@]}" -I"$tmp/pkg_mcu" "$tmp/pkg_mcu/kiln_cortex_m_startup.c" "$tmp/pkg_mcu/libtiny_cnn.a" \
  --specs=rdimon.specs -nostartfiles -T "$tmp/pkg_mcu/kiln_board.ld" -Wl,--no-warn-execstack -lm -o "$tmp/firmware_mcu"
# shellcheck disable=SC2086
$mcu_run -display none -monitor none -serial null -semihosting-config enable=on,target=native \
  -kernel "$tmp/firmware_mcu" | tee "$tmp/firmware_mcu.txt"

step "top 3 classes: reference interpreter vs the compiled packages"
# "class p" lines, best first. The reference prints "output NAME DTYPE [SHAPE]" and a line of values.
awk '/^output / { getline; for (i = 1; i <= NF; ++i) print i - 1, $i; exit }' "$tmp/reference.txt" |
  sort -k2,2gr -k1,1n | head -3 >"$tmp/top_reference"
for t in host arm mcu; do
  sed -n 's/^top [0-9]*: //p' "$tmp/firmware_$t.txt" | tr ',' '\n' |
    sed -n 's/^ *\([0-9]*\) (p=\([-0-9.e]*\))$/\1 \2/p' >"$tmp/top_$t"
done
printf '     %-20s%-20s%-28s%s\n' "reference" "$host" "$arm (QEMU)" "$mcu (QEMU)"
paste -d' ' "$tmp/top_reference" "$tmp/top_host" "$tmp/top_arm" "$tmp/top_mcu" |
  awk '{ printf "#%d   class %-2s %.6f   class %-2s %.6f   class %-2s %.6f           class %-2s %.6f\n", NR, $1, $2, $3, $4, $5, $6, $7, $8 }'
# Same classes in the same order, probabilities within 1e-5 (float32 against double, printed to 6 digits).
paste -d' ' "$tmp/top_reference" "$tmp/top_host" "$tmp/top_arm" "$tmp/top_mcu" | awk '
  function abs(x) { return x < 0 ? -x : x }
  { n++; if (NF != 8 || $1 != $3 || $1 != $5 || $1 != $7 || abs($2 - $4) > 1e-5 || abs($2 - $6) > 1e-5 || abs($2 - $8) > 1e-5) bad++ }
  END { exit (n != 3 || bad) }' || die "the compiled packages do not agree with the reference interpreter"
echo "agree: the $host, $arm and $mcu packages give the reference interpreter's top 3 classes (|dp| <= 1e-5)"
