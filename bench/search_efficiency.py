#!/usr/bin/env python3
"""bench/search_efficiency.py FLOPS=RECORDS.json... : best-so-far against trials, from tuning records.

For each records file (one op each, as bench/tune_ops.sh writes them; of several tasks, such as an op
in the blocked layout between two reorders, the one whose best time is the slowest), prints a markdown row: the
best valid latency (and GFLOPS, given the op's FLOPs) of the searched programs after 8, 16, 32, 64,
128 and all of them, and how many failed. The default-schedule baseline records are left out: this is
the search's own progress. Reads records only, so it can be re-run on old results.
"""
import json
import sys

CHECKPOINTS = [8, 16, 32, 64, 128]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
                r = j["r"]
            except (ValueError, KeyError, TypeError):
                continue
            if j.get("kiln_default") or "kiln_final" in j:  # the baseline, and re-measurements (no trials)
                continue
            costs, error, _, stamp = r
            ok = error == 0 and costs
            rows.append((j["i"][0][0], sum(costs) / len(costs) if ok else None, stamp))
    best = {}
    for key, cost, _ in rows:
        if cost is not None:
            best[key] = min(cost, best.get(key, cost))
    if not best:
        return [(cost, stamp) for _, cost, stamp in rows]
    op = max(best, key=best.get)  # the op itself; the other tasks are reorders around it
    return [(cost, stamp) for key, cost, stamp in rows if key == op]


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    head = " | ".join(f"best after {c}" for c in CHECKPOINTS)
    print(f"| op | programs | {head} | best after all | failed |")
    print("|---|---:|" + "---:|" * (len(CHECKPOINTS) + 2))
    for arg in sys.argv[1:]:
        flops, path = arg.split("=", 1)
        flops = float(flops)
        rows = load(path)
        best, bests = None, []
        for cost, _ in rows:
            if cost is not None and (best is None or cost < best):
                best = cost
            bests.append(best)

        def cell(n):
            if n > len(bests) or bests[n - 1] is None:
                return "-"
            b = bests[n - 1]
            return f"{b * 1e3:.3f} ms ({flops / b / 1e9:.0f} GF)"

        failed = sum(1 for c, _ in rows if c is None)
        name = path.rsplit("/", 1)[-1].replace(".records.json", "")
        cells = " | ".join(cell(c) for c in CHECKPOINTS)
        print(f"| {name} | {len(rows)} | {cells} | {cell(len(rows))} | {failed} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
