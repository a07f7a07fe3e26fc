#!/usr/bin/env bash
# kiln's main job, as far as it goes today: import a model that ships in the repository
# (examples/tiny_cnn.onnx, written by `kiln zoo tiny_cnn`), summarise it, and run it through the
# reference interpreter on a seeded input. Needs nothing outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
kiln=build/bin/kiln
model=examples/tiny_cnn.onnx

echo "== the shipped model is what kiln's zoo writes"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$kiln zoo tiny_cnn -o "$tmp/tiny_cnn.onnx"
cmp "$model" "$tmp/tiny_cnn.onnx" && echo "$model: identical to 'kiln zoo tiny_cnn'"

echo
echo "== kiln inspect $model --verbose"
$kiln inspect "$model" --verbose

echo
echo "== kiln run $model --seed 7   (reference interpreter)"
$kiln run "$model" --seed 7
