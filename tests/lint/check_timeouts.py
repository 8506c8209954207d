#!/usr/bin/env python3
# tests/lint/check_timeouts.py: no Criterion suite mixes tests whose own .timeout is above the suite's .timeout with
# tests that run under the suite's (no .timeout of their own, or one at most the suite's). Criterion 2.4.1's runner
# loses 48 bytes on such a suite, and under ASan's detect_leaks its exit 134 fails a run whose tests all passed.
# The convention: tests that need longer than their suite go in a suite of their own with that .timeout (as
# tests/e2e/test_execd.c's execd_init and test_files_transfer.c's files_transfer_big); a per-test .timeout below the
# suite's is fine. Binaries that turn LeakSanitizer off (__lsan_is_turned_off, tests/e2e/shared.c's too) are not checked.
#
# Usage: check_timeouts.py SOURCE_DIR. Prints each suite that mixes them, and fails if there is one.
import pathlib
import re
import sys

SUITE = re.compile(r"\bTestSuite\(\s*(\w+)([^;]*?)\)\s*;", re.S)
TEST = re.compile(r"\bTest\(\s*(\w+)\s*,\s*(\w+)([^{]*?)\)\s*\{", re.S)
TIMEOUT = re.compile(r"\.timeout\s*=\s*([0-9.]+)")


def main(root):
    tests_dir = pathlib.Path(root) / "tests"
    if not tests_dir.is_dir():
        print(f"no tests/ under {root}: wrong SOURCE_DIR?", file=sys.stderr)
        return 1
    bad = []
    for path in sorted(tests_dir.rglob("*.c")):
        text = path.read_text(errors="replace")
        # LeakSanitizer off: in the file, or in tests/e2e/shared.c, linked into every binary that includes shared.h
        if "__lsan_is_turned_off" in text or '#include "shared.h"' in text:
            continue
        suites = {}
        for m in SUITE.finditer(text):
            t = TIMEOUT.search(m.group(2))
            if t:
                suites[m.group(1)] = float(t.group(1))
        above, under = {}, {}
        for m in TEST.finditer(text):
            suite, name = m.group(1), m.group(2)
            if suite not in suites:
                continue
            t = TIMEOUT.search(m.group(3))
            if t and float(t.group(1)) > suites[suite]:
                above.setdefault(suite, []).append(name)
            else:
                under.setdefault(suite, []).append(name)
        for suite in sorted(set(above) & set(under)):
            rel = path.relative_to(root)
            bad.append(f"{rel}: suite {suite} (.timeout = {suites[suite]:g}) has {', '.join(above[suite])} above it "
                       f"and {len(under[suite])} test(s) under it")
    if bad:
        print("suites that mix per-test timeouts above the suite's with tests under it (Criterion's runner leaks; give the "
              "longer tests a suite of their own):", file=sys.stderr)
        print("\n".join(bad), file=sys.stderr)
        return 1
    print("no suite mixes per-test timeouts above its own with tests under it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
