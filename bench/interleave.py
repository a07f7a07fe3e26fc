#!/usr/bin/env python3
"""Times several programs in alternation: python3 interleave.py --rounds R NAME=CMD [NAME=CMD ...]

Why: on a shared machine the speed of a core changes for seconds at a time (another tenant, the
frequency), by up to 1.7x here. Timing A for ten seconds and then B compares two different machines.
Running A, B, A, B, ... in short turns exposes both to the same conditions.

Each CMD is a shell command that times its own runs and prints `median: X ms ...` and, optionally,
`min Y ms` on that line (kiln run and bench/ort/time_model.mjs do). Every command runs once per round,
in a rotating order. Prints one line per program:

    NAME min MIN_MS median MEDIAN_MS rounds R

MIN_MS is the fastest run of all rounds (the least disturbed; the number compared across programs).
MEDIAN_MS is the median of the rounds' medians. A command that fails prints `NAME failed: REASON`
and the others go on. The last round's standard output of each command is kept in
$INTERLEAVE_LOG_DIR/NAME.out when that variable is set.
"""
import os
import re
import statistics
import subprocess
import sys

LINE = re.compile(r"^median: ([0-9.]+) ms(?:.*min ([0-9.]+) ms)?", re.M)


def main(argv):
    rounds = 3
    programs = []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--rounds":
            rounds = int(args.pop(0))
        elif "=" in a:
            name, cmd = a.split("=", 1)
            programs.append((name, cmd))
        else:
            print(f"interleave.py: unexpected argument '{a}' (want NAME=CMD)", file=sys.stderr)
            return 2
    if not programs or rounds < 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    medians = {n: [] for n, _ in programs}
    mins = {n: [] for n, _ in programs}
    failed = {}
    log_dir = os.environ.get("INTERLEAVE_LOG_DIR")
    for r in range(rounds):
        order = programs[r % len(programs):] + programs[:r % len(programs)]
        for name, cmd in order:
            if name in failed:
                continue
            p = subprocess.run(cmd, shell=True, capture_output=True, text=True)
            m = LINE.search(p.stdout)
            if p.returncode != 0 or not m:
                why = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()
                failed[name] = why[-1][:160] if why else f"exit {p.returncode}"
                continue
            medians[name].append(float(m.group(1)))
            mins[name].append(float(m.group(2) or m.group(1)))
            if log_dir:
                with open(os.path.join(log_dir, name + ".out"), "w") as f:
                    f.write(p.stdout)
    for name, _ in programs:
        if name in failed:
            print(f"{name} failed: {failed[name]}")
        else:
            print(f"{name} min {min(mins[name]):.6f} median {statistics.median(medians[name]):.6f} rounds {rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
