#!/usr/bin/env python3
"""The table of a side-by-side bench: TIMES holds lines "N LABEL MS" (one timed call each);
prints, per N, the median of the calls labelled BEFORE and AFTER and their ratio after/before.

  side_by_side.py TIMES REPS BEFORE AFTER "N's column" "BEFORE's column" "AFTER's column"
"""
import collections
import statistics
import sys

times, reps, before, after, n_col, before_col, after_col = sys.argv[1:8]
d = collections.defaultdict(list)
for line in open(times):
    n, label, ms = line.split()
    d[(int(n), label)].append(float(ms))
print(f"| {n_col} | {before_col} (median of {reps}) | {after_col} | ratio |")
print("| ---: | ---: | ---: | ---: |")
for n in sorted({k[0] for k in d}):
    a, b = statistics.median(d[(n, before)]), statistics.median(d[(n, after)])
    print(f"| {n} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
