#!/usr/bin/env python3
"""Summarise a meson test run as one line 'N passed, N failed[, N skipped]'.

Counts every test that ran: each TAP test point of a TAP-protocol test, and
each plain test as one. A TAP program that crashed or exited non-zero after
its last point counts one extra failure so that nothing is hidden.
Usage: summary.py BUILD_DIR   (reads BUILD_DIR/meson-logs/testlog.json)
"""
import json
import re
import sys

def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    passed = failed = skipped = 0
    failures = []
    try:
        lines = open(f"{build}/meson-logs/testlog.json").read().splitlines()
    except OSError as e:
        print(f"summary: cannot read the test log: {e}", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    for line in lines:
        if not line.strip():
            continue
        t = json.loads(line)
        result = t.get("result", "")
        out = t.get("stdout") or ""
        # TAP output: test points plus a plan line (the log has no protocol field).
        is_tap = re.search(r"^1\.\.\d+", out, re.M) is not None
        points = re.findall(r"^(not ok|ok) \d+", out, re.M) if is_tap else []
        if points:
            for m in re.finditer(r"^(not ok|ok) \d+([^\n]*)", out, re.M):
                if "# SKIP" in m.group(2) or "# skip" in m.group(2):
                    skipped += 1
                elif m.group(1) == "ok":
                    passed += 1
                else:
                    failed += 1
                    failures.append(f"{t['name']}: {m.group(0).strip()}")
            if result not in ("OK", "EXPECTEDFAIL") and "not ok" not in points:
                failed += 1
                failures.append(f"{t['name']}: {result} (exit or plan)")
        elif result == "SKIP":
            skipped += 1
        elif result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        else:
            failed += 1
            failures.append(f"{t['name']}: {result}")
    if failures:
        print("failures:")
        for f in failures[:50]:
            print("  " + f)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
