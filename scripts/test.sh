#!/usr/bin/env bash
# Sets everything up, builds, and runs the whole test suite with ctest.
# KILN_TEST_LABELS=quick runs only the quick subset.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-ort.sh   # ONNX Runtime (npm), the peer of the `ort` tests: installed once, before tests run in parallel
scripts/build.sh
args=(--test-dir build --output-on-failure -j "$(nproc)" --output-junit "$PWD/build/Testing/junit.xml")
if [ -n "${KILN_TEST_LABELS:-}" ]; then args+=(-L "$KILN_TEST_LABELS"); fi
status=0
ctest "${args[@]}" || status=$?
# Which target the compiled tests ran for, and every skip with its reason (scripts/test-summary.py).
python3 scripts/test-summary.py build/Testing/junit.xml build/bin/kiln || true
exit "$status"
