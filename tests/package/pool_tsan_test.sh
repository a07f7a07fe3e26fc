#!/usr/bin/env bash
# The pthread pool that packages ship (runtime/kiln_parallel_pthread.c), its stress test under
# ThreadSanitizer. Some kernels randomise the address space more than TSan's runtime can map around;
# there the test exits 77, which ctest counts as a skip, and says why.
# usage: pool_tsan_test.sh SOURCE_DIR WORK_DIR   (CC from the environment, default cc)
set -euo pipefail
SRC=$1 WORK=$2
CC=${CC:-cc}
rm -rf "$WORK" && mkdir -p "$WORK"
"$CC" -std=c11 -O1 -g -fsanitize=thread -pthread -I"$SRC/runtime" "$SRC/tests/package/parallel_pthread_test.c" \
  "$SRC/runtime/kiln_parallel_pthread.c" -o "$WORK/pool_tsan"
if "$WORK/pool_tsan" >"$WORK/pool_tsan.txt" 2>&1; then
  cat "$WORK/pool_tsan.txt"
  exit 0
fi
if grep -q 'unexpected memory mapping' "$WORK/pool_tsan.txt"; then
  echo "skipped: ThreadSanitizer cannot map this kernel's address space (unexpected memory mapping)"
  exit 77
fi
cat "$WORK/pool_tsan.txt"
echo "FAIL: the pool's stress test failed under ThreadSanitizer" >&2
exit 1
