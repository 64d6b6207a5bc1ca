#!/usr/bin/env python3
"""Writes the CHECK-DAG stress inputs of hostile.kf (PREFIX.in, .in2, .same.chk,
.distinct.chk): 999 matches spread over 50 MB, each after 1000 filler lines."""
import sys

p = sys.argv[1]
filler = "x" * 49 + "\n"
with open(p + ".in", "w") as f:
    for i in range(999):
        f.write(filler * 1000 + "foo\n")
with open(p + ".in2", "w") as f:
    for i in range(999):
        f.write(filler * 1000 + f"item{i}\n")
with open(p + ".same.chk", "w") as f:
    f.write("CHECK-DAG: foo\n" * 999)
with open(p + ".distinct.chk", "w") as f:
    f.write("".join(f"CHECK-DAG: item{i}{{{{$}}}}\n" for i in reversed(range(999))))
