#!/usr/bin/env python3
"""test-summary.py JUNIT_XML KILN: the last lines of scripts/test.sh.

Says which target the compiled x86 tests ran for (they target `host`: the best ISA this CPU runs),
how many tests passed, failed and were skipped, and why each skipped one was skipped (the line of its
output that says so), so that a skip is seen in CI's log instead of buried in ctest's list."""
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def host_target(kiln):
    try:
        out = subprocess.run([kiln, "targets"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (kiln targets failed)"
    m = re.search(r"^\*\s+(\S+)", out, re.M)
    return m.group(1) if m else "none (no shipped target matches this CPU)"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def skip_reason(case):
    lines = [l.strip() for l in (case.findtext("system-out") or "").splitlines()]
    for i, line in enumerate(lines):
        if re.search(r"skip", line, re.I):
            if line.endswith("Skipped") and i + 1 < len(lines) and lines[i + 1]:  # GoogleTest: the reason follows
                line += " " + lines[i + 1]
            return line[:200]
    el = case.find("skipped")
    if el is not None and el.get("message"):
        return el.get("message")[:200]
    return "disabled" if case.get("status") == "disabled" else "no reason printed"


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    try:
        cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print(f"test summary: no results to summarize ({e})")
        return 0
    passed, failed, skipped = 0, [], []
    for c in cases:
        status = c.get("status", "")
        if c.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped.append((c.get("name"), skip_reason(c)))
        elif c.find("failure") is not None or status == "fail":
            failed.append(c.get("name"))
        else:
            passed += 1
    print(f"test summary: compiled x86 tests ran for the host target {host_target(sys.argv[2])} ({cpu_name()}); "
          f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    for name in failed:
        print(f"  failed: {name}")
    for name, reason in skipped:
        print(f"  skipped: {name}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
