#!/usr/bin/env bash
# rules_reproduce.sh KILN RULE_FILE: the versioned rule file is what the generator and the verifier
# make from scratch today (same axioms, same candidates, same proofs: Z3's step limit is
# deterministic). When the axioms or the generator change, regenerate the file with the command its
# first line names.
set -euo pipefail
kiln=$1
rules=$2
command=$(sed -n '1s/^# kiln graph substitutions: `kiln \(.*\)`$/\1/p' "$rules")
[ -n "$command" ] || { echo "rules_reproduce.sh: $rules does not start with the command that made it" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
read -r -a args <<<"$command"
"$kiln" "${args[@]}" -o "$work/rules.txt" >"$work/log"
if ! diff -q "$rules" "$work/rules.txt" >/dev/null; then
  echo "rules_reproduce.sh: $rules differs from what \`kiln $command\` makes now:" >&2
  diff "$rules" "$work/rules.txt" | head -20 >&2
  exit 1
fi
echo "$(grep -vc '^#' "$rules") rules reproduced ($(sed -n 2p "$rules"))"
