#!/usr/bin/env bash
# Runs a test binary's cases that only mean something for an unprivileged user (root may write into
# read-only directories). As root (CI), they run as the user 'nobody' through setpriv instead of
# skipping; as anyone else, directly. A case that still reports a skip fails this test.
# usage: run_as_non_root.sh TEST_BINARY GTEST_FILTER
set -euo pipefail
binary=$1 filter=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
chmod 644 "$out"
run=("$binary" "--gtest_filter=$filter")
if [ "$(id -u)" = 0 ]; then
  run=(setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- "${run[@]}")
fi
status=0
"${run[@]}" >"$out" 2>&1 || status=$?
cat "$out"
if grep -q '^\[  SKIPPED \]' "$out"; then echo "FAIL: a case skipped although it runs unprivileged" >&2; exit 1; fi
if ! grep -q '^\[  PASSED  \] [1-9]' "$out"; then echo "FAIL: no case passed (filter '$filter')" >&2; exit 1; fi
exit "$status"
