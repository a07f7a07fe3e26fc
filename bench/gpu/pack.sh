#!/usr/bin/env bash
# bench/gpu/pack.sh: what bench/gpu/device_run.sh needs on a GPU host, in .gpu/ (ignored by git; the
# device tool carries it with `carry: [".gpu"]`). kiln is built with KILN_LLVM_STATIC in build-static/
# (the GPU host has no LLVM) and travels with the shared libraries it still needs, except glibc's;
# ONNX's node tests and ../shared/models travel compressed. Under 64 MiB together.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${KILN_STATIC_BUILD:-build-static}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_STATIC=ON -DKILN_FUZZ=OFF >/dev/null
fi
ninja -C "$build" kiln >/dev/null
stage=$(mktemp -d)
mkdir -p "$stage/kiln/bin" "$stage/kiln/lib" .gpu
strip -o "$stage/kiln/bin/kiln" "$build/bin/kiln"
for lib in $(ldd "$build/bin/kiln" | awk '$3 ~ /^\// {print $3}'); do
  case $(basename "$lib") in libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libgcc_s.so.*) ;;
    *) cp -L "$lib" "$stage/kiln/lib/" ;; esac
done
tar cf - -C "$stage" kiln | xz -T0 -6 > .gpu/kiln.tar.xz
[ -f .gpu/onnx-node.tar.xz ] || tar cf - -C ../shared onnx-node | xz -T0 -6 > .gpu/onnx-node.tar.xz
[ -f .gpu/models.tar.xz ] || tar cf - -C ../shared models | xz -T0 -6 > .gpu/models.tar.xz
rm -rf "$stage"
du -b .gpu/* | awk '{s+=$1; print} END {printf "total %.1f MiB\n", s/1048576}'
