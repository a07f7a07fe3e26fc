#!/usr/bin/env bash
# zoo-ort-compare.sh NAME [kiln zoo flags...] -- [kiln conformance flags...] [-- more conformance flags...]
# Writes a zoo model and compares kiln with ONNX Runtime on it (scripts/ort-compare.sh). Later `--`
# separators are dropped, so a case's own flags (a tolerance) and an engine's can both follow.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=$1
shift
zoo_flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do zoo_flags+=("$1"); shift; done
conformance_flags=()
for a in "$@"; do [ "$a" = "--" ] || conformance_flags+=("$a"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$root/build/bin/kiln" zoo "$name" -o "$work/$name.onnx" "${zoo_flags[@]}"
"$root/scripts/ort-compare.sh" "$work/$name.onnx" 1 "${conformance_flags[@]}"
