#!/usr/bin/env bash
# run_if_present.sh PATH CMD...: runs CMD when PATH exists; otherwise says so and exits 77, which ctest
# reports as SKIPPED (never as passed).
path=$1
shift
if [ ! -e "$path" ]; then
  echo "SKIPPED: $path is not present (the shared test data lives beside the checkout in ../shared)"
  exit 77
fi
exec "$@"
