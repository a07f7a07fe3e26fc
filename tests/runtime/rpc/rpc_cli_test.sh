#!/usr/bin/env bash
# The driver's RPC commands end to end: `kiln tracker --port 0`, `kiln rpc-server --port 0 --tracker`,
# `kiln rpc status --tracker` showing the server, and the server leaving the pool when it stops; then
# the auth key: a wildcard bind without one, and a keyed tracker asked without it.
set -euo pipefail
kiln=$1
unset KILN_RPC_AUTH_KEY
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Waits for the "listening on H:P" line in a command's stdout file; prints the port.
port_of() {
  local out=$1
  for _ in $(seq 100); do
    if grep -q 'listening on' "$out"; then sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$out" | head -1; return; fi
    sleep 0.1
  done
  echo "FAIL: no 'listening on' line in $out" >&2; cat "$out.err" >&2; exit 1
}

"$kiln" tracker --port 0 --host 127.0.0.1 >"$work/tracker.out" 2>"$work/tracker.out.err" &
pids+=($!)
tport=$(port_of "$work/tracker.out")
"$kiln" rpc-server --port 0 --host 127.0.0.1 --tracker "127.0.0.1:$tport" --key cli-board \
  >"$work/server.out" 2>"$work/server.out.err" &
server_pid=$!
pids+=($server_pid)
sport=$(port_of "$work/server.out")

status=""
for _ in $(seq 50); do
  status=$("$kiln" rpc status --tracker "127.0.0.1:$tport")
  if echo "$status" | grep -Eq '^cli-board +1 +1 +0$'; then break; fi
  sleep 0.1
done
echo "$status"
echo "$status" | grep -Eq '^cli-board +1 +1 +0$' || { echo "FAIL: server $sport not registered" >&2; exit 1; }

kill "$server_pid"
for _ in $(seq 50); do
  status=$("$kiln" rpc status --tracker "127.0.0.1:$tport")
  if ! echo "$status" | grep -q cli-board; then break; fi
  sleep 0.1
done
echo "$status" | grep -q cli-board && { echo "FAIL: stopped server still listed" >&2; exit 1; }

# Bad arguments are one-line errors with exit code 2.
set +e
"$kiln" rpc status --tracker nonsense >/dev/null 2>"$work/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "bad --tracker" "$work/err" || { echo "FAIL: bad --tracker gave rc $rc" >&2; exit 1; }

# Without an auth key only loopback may listen: one line on stderr, exit code 2, nothing started.
for cmd in tracker rpc-server; do
  set +e
  "$kiln" $cmd --port 0 --host 0.0.0.0 >/dev/null 2>"$work/err"; rc=$?
  set -e
  [ "$rc" = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] && grep -q "auth key" "$work/err" ||
    { echo "FAIL: $cmd --host 0.0.0.0 without a key gave rc $rc: $(cat "$work/err")" >&2; exit 1; }
done

# A keyed tracker answers `rpc status` with the key and refuses it without.
key="$work/rpc.key"
(umask 077 && head -c 32 /dev/urandom | base64 >"$key")
"$kiln" tracker --port 0 --auth-key-file "$key" >"$work/keyed.out" 2>"$work/keyed.out.err" &
pids+=($!)
kport=$(port_of "$work/keyed.out")
"$kiln" rpc status --tracker "127.0.0.1:$kport" --auth-key-file "$key" | grep -q "no servers registered" ||
  { echo "FAIL: rpc status with the key" >&2; exit 1; }
set +e
"$kiln" rpc status --tracker "127.0.0.1:$kport" >/dev/null 2>"$work/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "auth" "$work/err" || { echo "FAIL: rpc status without the key gave rc $rc" >&2; exit 1; }
echo "PASS"
