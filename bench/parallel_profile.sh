#!/usr/bin/env bash
# bench/parallel_profile.sh PKG [REPEAT] [ORDER]
#
# Each parallel loop of a compiled kiln package (x86-64, this host), timed per thread: the package is
# linked with bench/native/parallel_profile.c and run with 1 thread, then with 2 (the caller takes the
# first half of every loop, one worker the second). Prints, per loop (<m>_kernel.sN is the statement
# headed `# sN` in `kiln dump MODEL --dump-after lower`, or in `kiln compile ... --dump-after lower`
# with records): its 1-thread time, each half's time at 2 threads, and the time lost against a
# perfect split, the biggest losses first (ORDER `lost`, the default) or the longest 1-thread times
# first (ORDER `time`); the first 25 loops, or $TOP. Its third line is the 2-thread run with each
# loop's halves in turns, one core after the other: near the 1-thread time when moving data between
# the cores is cheap, far above it when the host puts the two vCPUs far apart (bench/RESULTS.md, "Two
# threads on this host"; bench/native/cross_core_read.c tells which). Not part of ctest.
set -euo pipefail
pkg=${1:?usage: bench/parallel_profile.sh PKG [REPEAT] [lost|time]}
repeat=${2:-10}
order=${3:-lost}
top=${TOP:-25}
case $order in lost|time) ;; *) echo "parallel_profile.sh: ORDER is lost or time, not $order" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
json=$(ls "$pkg"/*.json | head -n 1)
name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$json")
sizes=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
ws = max(j["memory_plan"]["workspace_bytes"], 64)  # a model without intermediates still gets a buffer
print("{" + ", ".join(str(t["bytes"]) for t in j["inputs"] + j["outputs"]) + ", " + str(ws) + "}")' "$json")
inputs=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["inputs"]))' "$json")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -no-pie -I "$pkg" -DKP_HEADER="\"$name.h\"" -DKP_M="$name" -DKP_NUM_INPUTS="$inputs" -DKP_SIZES="$sizes" \
  "$root/bench/native/parallel_profile.c" "$pkg/lib$name.a" -lpthread -lm -o "$work/profile"
"$work/profile" 1 "$repeat" >"$work/t1"
"$work/profile" 2 "$repeat" >"$work/t2"
"$work/profile" turns "$repeat" >"$work/turns"
nm "$work/profile" >"$work/syms"
python3 - "$work" "$order" "$top" <<'PY'
import re, sys
work, order, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
syms = {int(a, 16): n for a, _, n in (l.split() for l in open(f"{work}/syms") if len(l.split()) == 3)}
def calls(f):
    rows = []
    for l in open(f):
        m = re.match(r"call \d+ fn (\S+) n (\d+) caller_us ([\d.]+) worker_us ([\d.]+) worker_delay_us ([\d.]+) wait_us ([\d.]+)", l)
        if m:
            rows.append((syms.get(int(m.group(1), 16), m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4)), float(m.group(6))))
    return rows
one, two = calls(f"{work}/t1"), calls(f"{work}/t2")
print(open(f"{work}/t1").readline().strip())
print(open(f"{work}/t2").readline().strip())
print(open(f"{work}/turns").readline().strip(), "(the halves one after the other: near the 1-thread time unless moving data between the cores, or the host, costs)")
t1 = sum(c[2] for c in one)
t2 = sum(c[2] + c[4] for c in two)
print(f"parallel loops: {len(one)}; 1 thread {t1 / 1e3:.2f} ms, 2 threads {t2 / 1e3:.2f} ms, a perfect split {t1 / 2e3:.2f} ms")
print(f"{'loop':32} {'n':>5} {'1 thread us':>12} {'caller us':>10} {'worker us':>10} {'lost us':>8}")
lost = lambda p: p[1][2] + p[1][4] - p[0][2] / 2
rows = sorted(zip(one, two), key=(lambda p: -p[0][2]) if order == "time" else (lambda p: -lost(p)))
for a, b in rows[:top]:
    print(f"{a[0]:32} {a[1]:5d} {a[2]:12.1f} {b[2]:10.1f} {b[3]:10.1f} {lost((a, b)):8.1f}")
PY
