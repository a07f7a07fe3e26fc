#!/usr/bin/env bash
# The package as its users see it: compiles examples/tiny_cnn.onnx with `kiln compile`, then
#   a) the header is strict C99 (and C++), the shipped pool is strict C11, the library needs no threads;
#   b) the firmware example (static arena, no malloc) agrees with the reference interpreter's top class;
#   c) the server example (pool + concurrent instances) built through the package's CMake file;
#   d) the firmware example under -fsanitize=address,undefined;
#   e) a package whose target compiler is missing: no .o, and the CMake file builds the pool from source;
#   f) `kiln run DIR --threads T` equals --threads 1 (tiny_cnn, and a conv2d big enough to go parallel);
#   g) weights of a huge page or more start on one (the target's huge_page_bytes), also in a linked PIE.
# The pool under ThreadSanitizer is pool_tsan_test.sh (a test of its own, so ctest can count its skip).
# usage: package_test.sh KILN SOURCE_DIR WORK_DIR   (CC / CXX from the environment, default cc / c++)
set -euo pipefail
KILN=$1 SRC=$2 WORK=$3
CC=${CC:-cc} CXX=${CXX:-c++}
rm -rf "$WORK" && mkdir -p "$WORK"
PKG=$WORK/pkg
step() { printf '== %s\n' "$*"; }
die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

step "kiln compile tiny_cnn"
"$KILN" compile "$SRC/examples/tiny_cnn.onnx" -o "$PKG" --name tiny_cnn
for f in libtiny_cnn.a tiny_cnn.h tiny_cnn.json tiny_cnnConfig.cmake \
         kiln_parallel_pthread.c kiln_parallel_pthread.h kiln_parallel_pthread.o; do
  [ -f "$PKG/$f" ] || die "the package has no $f"
done

step "a) strict header and pool source; no threads in the library"
"$CC" -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c "$PKG/tiny_cnn.h"
"$CXX" -std=c++17 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c++ "$PKG/tiny_cnn.h"
"$CC" -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c "$PKG/kiln_parallel_pthread.h"
"$CC" -std=c11 -Wall -Wextra -Werror -pedantic -pthread -fsyntax-only "$PKG/kiln_parallel_pthread.c"
if nm -u "$PKG/libtiny_cnn.a" | grep -E '\b(pthread_[a-z_]+|malloc|calloc|free|printf|fopen)\b'; then
  die "libtiny_cnn.a references threads, malloc or stdio"
fi

step "b) firmware example vs the reference interpreter"
"$KILN" run "$SRC/examples/tiny_cnn.onnx" --save-inputs "$WORK/ref_inputs" --print 1000 >"$WORK/reference.txt"
# The reference's seeded input, as the firmware's ROM test vector: raw_data is the last field of the
# serialized TensorProto, so the file ends with the tensor's bytes.
size=$(awk '$2 == "TINY_CNN_INPUT_IMAGE_SIZE" { print $3 }' "$PKG/tiny_cnn.h")
[ -n "$size" ] || die "no TINY_CNN_INPUT_IMAGE_SIZE in the header"
{
  echo "static const uint8_t firmware_input_bytes[] = {"
  tail -c "$size" "$WORK/ref_inputs/input_0.pb" | od -An -v -tx1 | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'
  echo "};"
} >"$WORK/input_vector.h"
# Top class and its probability from "output NAME DTYPE [SHAPE]" + a line of values.
read -r ref_top ref_p < <(awk '/^output / { getline; best = 1; for (i = 2; i <= NF; ++i) if ($i + 0 > $best + 0) best = i;
                                           print best - 1, $best; exit }' "$WORK/reference.txt")
fw_flags=(-std=c99 -O2 -Wall -Wextra -Werror -pedantic -I"$PKG" -I"$WORK" '-DFIRMWARE_INPUT_HEADER="input_vector.h"')
"$CC" "${fw_flags[@]}" -c "$SRC/examples/firmware/main.c" -o "$WORK/firmware.o"
if nm -u "$WORK/firmware.o" | grep -E '\b(malloc|calloc|realloc|free|aligned_alloc|pthread_[a-z_]+)\b'; then
  die "the firmware example allocates or uses threads"
fi
"$CC" "$WORK/firmware.o" "$PKG/libtiny_cnn.a" -lm -o "$WORK/firmware"
"$WORK/firmware" | tee "$WORK/firmware.txt"
check_firmware() {
  read -r fw_top fw_p < <(sed -n 's/^top class: \([0-9]*\) (p=\([-0-9.e]*\))$/\1 \2/p' "$1")
  [ "${fw_top:-x}" = "$ref_top" ] || die "$1: top class ${fw_top:-none}, the reference says $ref_top"
  awk -v a="$fw_p" -v b="$ref_p" 'BEGIN { d = a - b; exit (d < 0 ? -d : d) > 1e-4 }' ||
    die "$1: top probability $fw_p, the reference says $ref_p"
}
check_firmware "$WORK/firmware.txt"
echo "reference top class $ref_top (p=$ref_p): same"
# The built-in input pattern (no test vector) builds and runs too.
"$CC" -std=c99 -O2 -Wall -Wextra -Werror -pedantic -I"$PKG" "$SRC/examples/firmware/main.c" "$PKG/libtiny_cnn.a" -lm \
  -o "$WORK/firmware_builtin"
"$WORK/firmware_builtin" | grep -q '^top class: '

step "c) server example through the package's CMake file (find_package, kiln::tiny_cnn)"
cmake -S "$SRC/examples/server" -B "$WORK/server" -G Ninja -DKILN_PACKAGE_DIR="$PKG" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$WORK/server" >/dev/null
"$WORK/server/server" 4 3 30

step "d) firmware example with -fsanitize=address,undefined"
"$CC" "${fw_flags[@]}" -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
  "$SRC/examples/firmware/main.c" "$PKG/libtiny_cnn.a" -lm -o "$WORK/firmware_asan"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$WORK/firmware_asan" >"$WORK/firmware_asan.txt"
check_firmware "$WORK/firmware_asan.txt"
echo "clean"

step "e) no target compiler: the pool ships as source, the CMake file builds it"
sed -e 's/^cc = .*/cc = "kiln-test-no-such-cc"/' "$SRC/targets/x86_64-generic.toml" >"$WORK/nocc.toml"
"$KILN" compile "$SRC/examples/tiny_cnn.onnx" --target "$WORK/nocc.toml" -o "$WORK/pkg_nocc" --name tiny_cnn >/dev/null
[ -f "$WORK/pkg_nocc/kiln_parallel_pthread.c" ] || die "no pool source without a compiler"
[ ! -e "$WORK/pkg_nocc/kiln_parallel_pthread.o" ] || die "a pool object without a compiler?"
cmake -S "$SRC/examples/server" -B "$WORK/server_nocc" -G Ninja -DKILN_PACKAGE_DIR="$WORK/pkg_nocc" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" >/dev/null
cmake --build "$WORK/server_nocc" >/dev/null
"$WORK/server_nocc/server" 2 2 5

step "f) kiln run --threads"
for t in 1 2; do
  "$KILN" run "$PKG" --threads "$t" --repeat 3 --output-dir "$WORK/run_t$t" >/dev/null
done
cmp "$WORK/run_t1/output_0.pb" "$WORK/run_t2/output_0.pb" || die "tiny_cnn: --threads 2 differs from --threads 1"
# tiny_cnn's stages are too small for the default schedule to go parallel; this conv is not.
"$KILN" zoo conv2d --size 32 --in-channels 8 --out-channels 32 -o "$WORK/conv.onnx"
"$KILN" compile "$WORK/conv.onnx" -o "$WORK/pkg_conv" --name conv >/dev/null
for t in 1 3; do
  "$KILN" run "$WORK/pkg_conv" --threads "$t" --repeat 3 --output-dir "$WORK/conv_t$t" | tail -1
done
cmp "$WORK/conv_t1/output_0.pb" "$WORK/conv_t3/output_0.pb" || die "conv: --threads 3 differs from --threads 1"
echo "same outputs"

step "g) weights that fill a huge page start on one; a PIE keeps that alignment"
# A 512 -> 512 3x3 conv has 9.4 MB of weights; tiny_cnn's are a few KB. The shipped targets say 2 MiB.
"$KILN" zoo conv2d --size 4 --in-channels 512 --out-channels 512 -o "$WORK/big.onnx"
"$KILN" compile "$WORK/big.onnx" -o "$WORK/pkg_big" --name big >/dev/null
weights_align() { objdump -h "$1" | awk -v s=".rodata.$2.weights" '$2 == s { print $7 }'; }
[ "$(weights_align "$WORK/pkg_big/libbig.a" big)" = "2**21" ] ||
  die "big: weights section aligned to $(weights_align "$WORK/pkg_big/libbig.a" big), expected 2**21"
[ "$(weights_align "$PKG/libtiny_cnn.a" tiny_cnn)" = "2**6" ] ||
  die "tiny_cnn: weights section aligned to $(weights_align "$PKG/libtiny_cnn.a" tiny_cnn), expected 2**6"
# (through a volatile pointer: a plain `big_run_argv == 0` folds to 0 and links nothing)
printf '#include "big.h"\nint main(void) { void (*volatile f)(void) = (void (*)(void))big_run_argv; return f == 0; }\n' \
  >"$WORK/big_main.c"
"$CC" -fPIE -pie -I"$WORK/pkg_big" "$WORK/big_main.c" "$WORK/pkg_big/libbig.a" -lm -o "$WORK/big_pie"
readelf -lW "$WORK/big_pie" | awk '$1 == "LOAD" && $NF == "0x200000" { found = 1 } END { exit !found }' ||
  die "a PIE linked with libbig.a has no 2 MiB-aligned segment"
echo "weights on a huge page"

echo "package test: all passed"
