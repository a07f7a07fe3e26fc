#!/usr/bin/env bash
# run_if_cpu_has.sh FLAG CMD...: runs CMD when /proc/cpuinfo lists FLAG (e.g. avx512f); otherwise says
# so and exits 77, which ctest reports as SKIPPED.
flag=$1
shift
if ! grep -qw "$flag" /proc/cpuinfo 2>/dev/null; then
  echo "SKIPPED: this CPU lacks $flag, so code for that target cannot run here"
  exit 77
fi
exec "$@"
