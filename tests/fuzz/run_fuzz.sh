#!/usr/bin/env bash
# run_fuzz.sh FUZZER MAKE_SEEDS WORKDIR SECONDS [SEED_KIND]: a bounded libFuzzer run from a fresh seed
# corpus (`MAKE_SEEDS DIR [SEED_KIND]` writes it).
# Fails (non-zero) on any crash, leak, timeout or out-of-memory the fuzzer finds.
set -euo pipefail
fuzzer=$1 make_seeds=$2 work=$3 seconds=$4 seed_kind=${5:-}
rm -rf "$work"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
"$make_seeds" "$work/seeds" ${seed_kind:+"$seed_kind"}
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
"$fuzzer" "$work/corpus" "$work/seeds" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -malloc_limit_mb=2048 -artifact_prefix="$work/artifacts/" -print_final_stats=1 2>&1 | tail -n 25
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "fuzzer failed with status $status; reproducer(s) in $work/artifacts:"
  ls -la "$work/artifacts"
fi
exit "$status"
