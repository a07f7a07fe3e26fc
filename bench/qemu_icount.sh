#!/usr/bin/env bash
# bench/qemu_icount.sh PKG [KILN]
#
# AArch64 instructions per inference of a kiln package, counted under qemu-aarch64: QEMU runs one
# guest instruction per translation block (-singlestep) and logs every block it executes
# (-d exec,nochain, through QEMU_* environment variables, which `kiln run`'s qemu prefix passes on),
# and the logged blocks are counted. (count at --repeat 3 - count at --repeat 1) / 2 leaves out
# process start-up, loading and the runner's own work. What it measures: instructions retired, the
# same on every machine; not cycles (no pipeline, caches or memory), so it ranks code that differs in
# how many instructions it runs (a dot-product instruction against its expansion), not code that
# differs in how it uses a core. KILN: the kiln binary that runs PKG (default build/bin/kiln). Not part
# of ctest; a few seconds per million instructions.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkg=$1
kiln=${2:-$root/build/bin/kiln}
fifo=$(mktemp -u)
mkfifo "$fifo"
trap 'rm -f "$fifo" "$fifo.count"' EXIT
blocks_at() {
  grep -c "^Trace" <"$fifo" >"$fifo.count" &
  QEMU_SINGLESTEP=1 QEMU_LOG=exec,nochain QEMU_LOG_FILENAME="$fifo" "$kiln" run "$pkg" --repeat "$1" --print 0 >/dev/null
  wait
  cat "$fifo.count"
}
one=$(blocks_at 1)
three=$(blocks_at 3)
echo $(((three - one) / 2))
