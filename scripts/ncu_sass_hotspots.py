#!/usr/bin/env python3
"""Sums Nsight Compute's per-SASS-instruction warp-stall samples over every profiled launch in a CSV export
and prints where a kernel waits: the top instructions (with their warp-level executions over all launches,
their main stall reasons and the instructions just before them, so the waited-on producer is visible) and
the samples per stall reason.

    ncu --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 ... -o rep APP
    ncu -i rep.ncu-rep --page source --print-source sass --csv > sass.csv
    scripts/ncu_sass_hotspots.py sass.csv [--top 40] [--kernel SUBSTRING]

One launch of a short kernel yields a hundred samples or so; profiling 10-20 launches and summing them is
what makes the per-instruction picture readable.
"""
import argparse
import collections
import csv
import sys


def parse(path, kernel_filter):
    """Yields (kernel name, header, rows) for each profiled launch in the export."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    i = 0
    while i < len(rows):
        row = rows[i]
        if row and row[0] == "Kernel Name":
            name = row[1] if len(row) > 1 else ""
            header = rows[i + 1]
            j = i + 2
            while j < len(rows) and not (rows[j] and rows[j][0] == "Kernel Name"):
                j += 1
            if kernel_filter in name:
                yield name, header, rows[i + 2:j]
            i = j
        else:
            i += 1


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--kernel", default="")
    parser.add_argument("--context", type=int, default=3, help="instructions shown before each hot one")
    args = parser.parse_args()

    samples = collections.Counter()  # instruction index -> samples, summed over launches
    reasons = collections.defaultdict(collections.Counter)
    executed = collections.Counter()
    source = {}
    launches = 0
    for _, header, rows in parse(args.csv, args.kernel):
        launches += 1
        col = {n: k for k, n in enumerate(header)}
        stall_cols = [n for n in header if n.startswith("stall_") and "Not Issued" not in n]
        for index, row in enumerate(rows):
            if len(row) < len(header):
                continue
            source[index] = row[col["Source"]].strip()
            samples[index] += number(row[col["Warp Stall Sampling (All Samples)"]])
            executed[index] += number(row[col["Instructions Executed"]])
            for n in stall_cols:
                v = number(row[col[n]])
                if v:
                    reasons[index][n[len("stall_"):]] += v
    if not launches:
        sys.exit(f"{args.csv}: no profiled launch of a kernel matching '{args.kernel}'")
    total = sum(samples.values())
    print(f"# {launches} launches, {len(source)} SASS instructions, {total:.0f} stall samples")
    by_reason = collections.Counter()
    for r in reasons.values():
        by_reason.update(r)
    print("samples per reason: " + ", ".join(f"{k} {v / total:.1%}" for k, v in by_reason.most_common(10)))
    print()
    for index, count in samples.most_common(args.top):
        top = ", ".join(f"{k} {v:.0f}" for k, v in reasons[index].most_common(3))
        print(f"{count:6.0f} {count / total:5.1%}  [{index:5d}] {source[index]:60s}  "
              f"x{executed[index]:<7.0f} ({top})")
        for k in range(max(0, index - args.context), index):
            print(f"{'':22s}[{k:5d}] {source.get(k, ''):60s}")


if __name__ == "__main__":
    main()
