#!/usr/bin/env python3
"""Line and branch coverage of src/ per folder, from gcovr's JSON summary.

usage: python3 scripts/coverage.py build-cov/coverage.json

gcovr reports each file; a folder's figure is its files' covered lines
(branches) over their total, so a large file weighs as its lines do.
Prints a table: folder, lines covered/total and %, branches covered/total
and %, then the total over src/."""
import json
import sys
from collections import OrderedDict


def pct(c, t):
    return 100.0 * c / t if t else 100.0


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: coverage.py GCOVR_SUMMARY.json")
    with open(sys.argv[1]) as f:
        summary = json.load(f)
    folders = OrderedDict()
    for fl in sorted(summary["files"], key=lambda x: x["filename"]):
        parts = fl["filename"].split("/")
        key = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
        acc = folders.setdefault(key, [0, 0, 0, 0])
        acc[0] += fl["line_covered"]
        acc[1] += fl["line_total"]
        acc[2] += fl["branch_covered"]
        acc[3] += fl["branch_total"]
    print("%-16s %17s %7s %17s %7s" % ("folder", "lines", "%", "branches", "%"))
    tot = [0, 0, 0, 0]
    for key, a in folders.items():
        tot = [x + y for x, y in zip(tot, a)]
        print("%-16s %8d/%-8d %6.1f%% %8d/%-8d %6.1f%%" %
              (key, a[0], a[1], pct(a[0], a[1]), a[2], a[3], pct(a[2], a[3])))
    print("%-16s %8d/%-8d %6.1f%% %8d/%-8d %6.1f%%" %
          ("src (total)", tot[0], tot[1], pct(tot[0], tot[1]), tot[2], tot[3],
           pct(tot[2], tot[3])))


if __name__ == "__main__":
    main()
