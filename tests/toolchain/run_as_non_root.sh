#!/usr/bin/env bash
# Runs a test binary's cases that only mean something for an unprivileged user (root may write into
# read-only directories). As root (CI), they run as the user 'nobody' through setpriv instead of
# skipping; as anyone else, directly. A case that still reports a skip fails this test.
# usage: run_as_non_root.sh TEST_BINARY GTEST_FILTER [A_FILE_THE_CASES_READ]
set -euo pipefail
binary=$1 filter=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
chmod 644 "$out"
run=("$binary" "--gtest_filter=$filter")
if [ "$(id -u)" = 0 ]; then
  as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env --)
  # A checkout under a private directory (/root) is out of nobody's reach: say so and skip (exit 77,
  # counted by ctest) rather than fail for a reason that is not the code's.
  for path in "$binary" "${3:-$binary}"; do
    if ! "${as_nobody[@]}" test -r "$path"; then
      echo "skipped: the user nobody cannot reach $path (a parent directory is private)"
      exit 77
    fi
  done
  run=("${as_nobody[@]}" "${run[@]}")
fi
status=0
"${run[@]}" >"$out" 2>&1 || status=$?
cat "$out"
if grep -q '^\[  SKIPPED \]' "$out"; then echo "FAIL: a case skipped although it runs unprivileged" >&2; exit 1; fi
if ! grep -q '^\[  PASSED  \] [1-9]' "$out"; then echo "FAIL: no case passed (filter '$filter')" >&2; exit 1; fi
exit "$status"
