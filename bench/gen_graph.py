#!/usr/bin/env python3
"""Writes one random element-wise graph twice: DIR/g.kf (kfuse) and DIR/g.mlir
(TOSA in func.func, for mlir-opt), for timing the parsers side by side.

The graph is deterministic for a seed.  Operands come mostly from the last
few values (as in real models) and sometimes from far back; some nodes are
exact duplicates of earlier ones (CSE-able) and some are never used (dead).
Every value is tensor<1024xf32> / f32[1024].
"""
import argparse
import os
import random

# (kfuse op, TOSA op, operand count, extra TOSA attributes)
OPS = [
    ("add", "tosa.add", 2, ""),
    ("mul", "tosa.mul", 2, " {shift = 0 : i8}"),
    ("sub", "tosa.sub", 2, ""),
    ("max", "tosa.maximum", 2, ""),
    ("min", "tosa.minimum", 2, ""),
    ("tanh", "tosa.tanh", 1, ""),
    ("exp", "tosa.exp", 1, ""),
    ("sigmoid", "tosa.sigmoid", 1, ""),
    ("abs", "tosa.abs", 1, ""),
    ("neg", "tosa.negate", 1, ""),
]
NINPUT = 4
KT = "f32[1024]"
MT = "tensor<1024xf32>"


def build(nodes, seed, dup_rate, dead_rate):
    """Returns the inputs' names, the nodes (name, op index, operand names)
    and the returned value."""
    rng = random.Random(seed)
    inputs = ["in%d" % i for i in range(NINPUT)]
    live = list(inputs)  # values later nodes may read
    out = []
    for i in range(nodes):
        name = "v%d" % i
        if out and rng.random() < dup_rate:
            _, k, args = out[rng.randrange(len(out))]  # the same computation again
        else:
            k = rng.randrange(len(OPS))
            args = []
            for _ in range(OPS[k][2]):
                if rng.random() < 0.8:
                    args.append(live[-1 - rng.randrange(min(16, len(live)))])
                else:
                    args.append(live[rng.randrange(len(live))])
        out.append((name, k, args))
        if rng.random() >= dead_rate:
            live.append(name)
    return inputs, out, live[-1]


def write_kf(path, inputs, nodes, ret):
    with open(path, "w") as f:
        f.write("graph @main(%s) -> (%s) {\n" % (", ".join("%%%s: %s" % (a, KT) for a in inputs), KT))
        for name, k, args in nodes:
            f.write("  %%%s = %s(%s) : %s\n" % (name, OPS[k][0], ", ".join("%" + a for a in args), KT))
        f.write("  return %%%s\n}\n" % ret)


def write_mlir(path, inputs, nodes, ret):
    with open(path, "w") as f:
        f.write("func.func @main(%s) -> %s {\n" % (", ".join("%%%s: %s" % (a, MT) for a in inputs), MT))
        for name, k, args in nodes:
            _, op, n, attrs = OPS[k]
            f.write("  %%%s = %s %s%s : (%s) -> %s\n" % (
                name, op, ", ".join("%" + a for a in args), attrs, ", ".join([MT] * n), MT))
        f.write("  return %%%s : %s\n}\n" % (ret, MT))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=200000)
    ap.add_argument("--out", required=True, help="directory for g.kf and g.mlir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dup-rate", type=float, default=0.05, help="share of duplicated nodes")
    ap.add_argument("--dead-rate", type=float, default=0.05, help="share of nodes no one reads")
    a = ap.parse_args()
    if a.nodes < 1:
        ap.error("--nodes must be at least 1")
    os.makedirs(a.out, exist_ok=True)
    inputs, nodes, ret = build(a.nodes, a.seed, a.dup_rate, a.dead_rate)
    write_kf(os.path.join(a.out, "g.kf"), inputs, nodes, ret)
    write_mlir(os.path.join(a.out, "g.mlir"), inputs, nodes, ret)


if __name__ == "__main__":
    main()
