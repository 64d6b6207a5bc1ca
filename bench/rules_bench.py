#!/usr/bin/env python3
"""Benchmark of the rules pass: the standard rule library (patterns/, 61
rules and a Lua-defined op or two) over a generated graph of about 1M nodes.

    bench/rules_bench.py [--nodes 1000000] [--kfuse-opt PATH] [--keep DIR]

The graph repeats blocks that real exporters produce (GELU in erf and tanh
form, SiLU, stable softmax, layer norm, RMS norm, a bias add) between
element-wise ops that match nothing, so most nodes are tried against some
rule and fail.  Prints kfuse-opt's timing table and the rules summary: how
many rewrites, how many match attempts, how many structural matches and how
many times Lua was entered (only the layer norm's where() and per-match
replacement enter it; the other rules are traced once and run in C).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

T = "f32[8,16]"
R = "f32[8,1]"


class Gen:
    def __init__(self):
        self.n = 0
        self.lines = []

    def v(self):
        self.n += 1
        return "%%v%d" % self.n

    def op(self, text, ty=T):
        name = self.v()
        self.lines.append("  %s = %s : %s" % (name, text, ty))
        return name

    def const(self, val):
        return self.op("const %s" % val, "f32[]")

    def gelu_erf(self, x):
        c = self.const("0.7071067811865476")
        d = self.op("mul(%s, %s)" % (x, c))
        e = self.op("erf(%s)" % d)
        one = self.const("1.0")
        a = self.op("add(%s, %s)" % (one, e))
        h = self.const("0.5")
        hx = self.op("mul(%s, %s)" % (h, x))
        return self.op("mul(%s, %s)" % (hx, a))

    def gelu_tanh(self, x):
        three = self.const("3.0")
        x3 = self.op("pow(%s, %s)" % (x, three))
        k = self.const("0.044715")
        a = self.op("mul(%s, %s)" % (x3, k))
        s = self.op("add(%s, %s)" % (x, a))
        c = self.const("0.7978845608")
        i = self.op("mul(%s, %s)" % (c, s))
        t = self.op("tanh(%s)" % i)
        one = self.const("1.0")
        u = self.op("add(%s, %s)" % (t, one))
        h = self.const("0.5")
        hx = self.op("mul(%s, %s)" % (x, h))
        return self.op("mul(%s, %s)" % (hx, u))

    def silu(self, x):
        s = self.op("sigmoid(%s)" % x)
        return self.op("mul(%s, %s)" % (x, s))

    def softmax(self, x):
        m = self.op("reduce_max(%s) {axes = [-1]}" % x, R)
        d = self.op("sub(%s, %s)" % (x, m))
        e = self.op("exp(%s)" % d)
        z = self.op("reduce_sum(%s) {axes = [-1]}" % e, R)
        return self.op("div(%s, %s)" % (e, z))

    def layer_norm(self, x):
        mu = self.op("reduce_mean(%s) {axes = [-1]}" % x, R)
        d = self.op("sub(%s, %s)" % (x, mu))
        d2 = self.op("mul(%s, %s)" % (d, d))
        v = self.op("reduce_mean(%s) {axes = [-1]}" % d2, R)
        eps = self.const("1e-05")
        ve = self.op("add(%s, %s)" % (v, eps), R)
        s = self.op("sqrt(%s)" % ve, R)
        return self.op("div(%s, %s)" % (d, s))

    def rms(self, x):
        sq = self.op("mul(%s, %s)" % (x, x))
        ms = self.op("reduce_mean(%s) {axes = [-1]}" % sq, R)
        eps = self.const("1e-06")
        a = self.op("add(%s, %s)" % (ms, eps), R)
        r = self.op("sqrt(%s)" % a, R)
        return self.op("div(%s, %s)" % (x, r))

    def noise(self, x, k):
        # element-wise ops that no rule rewrites
        c = self.const("%d.25" % (k % 7 + 1))
        a = self.op("add(%s, %s)" % (x, c))
        b = self.op("mul(%s, %s)" % (a, c))
        t = self.op("tanh(%s)" % b)
        return self.op("sub(%s, %s)" % (t, x))


def generate(nodes, path):
    g = Gen()
    x = "%x"
    blocks = [g.gelu_erf, g.silu, g.softmax, g.gelu_tanh, g.layer_norm, g.rms]
    k = 0
    counts = {}
    while g.n < nodes - 2:
        f = blocks[k % len(blocks)]
        counts[f.__name__] = counts.get(f.__name__, 0) + 1
        x = f(x)
        x = g.noise(x, k)
        k += 1
    with open(path, "w") as out:
        out.write("graph @bench(%%x: %s) -> (%s) {\n" % (T, T))
        out.write("\n".join(g.lines))
        out.write("\n  return %s\n}\n" % x)
    return g.n, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000000)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap.add_argument("--kfuse-opt", default=os.path.join(root, "build", "kfuse-opt"))
    ap.add_argument("--patterns", default=os.path.join(root, "patterns"))
    ap.add_argument("--keep", help="write the graph here instead of a temp dir")
    a = ap.parse_args()
    d = a.keep or tempfile.mkdtemp()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "g.kf")
    n, counts = generate(a.nodes, path)
    print("graph: %d nodes (%s), blocks: %s" % (n, path, ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    cmd = [a.kfuse_opt, path, "-p", "rules{path=%s,stats}" % a.patterns, "--timing", "-o", os.devnull]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    sys.stdout.write(p.stderr)
    print("wall: %.2f s, exit status %d" % (wall, p.returncode))
    if not a.keep:
        shutil.rmtree(d)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
