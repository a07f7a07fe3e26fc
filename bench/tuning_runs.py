#!/usr/bin/env python3
"""The tuning-runs table of bench/RESULTS.md: python3 tuning_runs.py RECORDS_DIR

Reads every NAME.tune.log that bench/tune_models.sh wrote (kiln tune --plain) and NAME.json beside it,
and prints one markdown row per model: tasks, trials, tuning time, measured candidates per second, the
final estimate, and in how many tasks a searched program beat the default schedule (both as measured
while tuning; the default's time is the fastest of its measurements).
"""
import glob
import json
import os
import re
import sys


def searched_wins(records):
    default, best = {}, {}
    for line in open(records):
        try:
            r = json.loads(line)
            task = r["i"][0][0]
            costs, err = r["r"][0], r["r"][1]
        except (ValueError, KeyError, IndexError, TypeError):
            continue
        cost = sum(costs) / len(costs) if err == 0 and costs else float("inf")
        side = default if r.get("kiln_default") else best
        side[task] = min(side.get(task, float("inf")), cost)
    tasks = set(default) | set(best)
    return sum(best.get(t, float("inf")) < default.get(t, float("inf")) for t in tasks), len(tasks)


def main(argv):
    if len(argv) != 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    print("| model | tasks | trials | tuning time | measured/s | estimate ms | tasks where search beat default |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for log in sorted(glob.glob(os.path.join(argv[0], "*.tune.log"))):
        name = os.path.basename(log)[: -len(".tune.log")]
        text = open(log).read()
        tasks = re.search(r"kiln tune: (\d+) task\(s\)", text)
        final = re.search(r"kiln tune: (\d+) trials, estimated latency ([0-9.]+) ms", text)
        rounds = re.findall(r"\| ([0-9.]+) measured/s \| elapsed (\d\d:\d\d:\d\d)", text)
        if not (tasks and final and rounds):
            print(f"| {name} | unfinished (see {log}) | | | | | |")
            continue
        rate, elapsed = rounds[-1]
        records = os.path.join(argv[0], name + ".json")
        wins, n = searched_wins(records) if os.path.exists(records) else (0, 0)
        print(f"| {name} | {tasks.group(1)} | {final.group(1)} | {elapsed} | {rate} | {final.group(2)} | {wins} of {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
