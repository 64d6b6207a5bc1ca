#!/usr/bin/env python3
"""Shrinks a graph that kf-random found failing to a small one that fails
the same way, for tests/random/regress/.

    reduce.py FINDING.kf [--kf-random PATH] [--pipeline P] [--expect KIND]
              [--nvrtc] [-o OUT.kf]

The oracle is `kf-random --check CANDIDATE --pipeline P --expect KIND`: a
candidate is kept when the check still fails with the same verdict (the
pipeline and the verdict come from the file's `# PIPELINE:` and
`# kf-random finding:` lines unless given).  Steps, repeated until none
helps (delta debugging, Zeller's ddmin, over each list):
  - drop graph results (at least one stays);
  - cut nodes: a node becomes a graph input of its type, so that what fed
    it is dead;
  - drop nodes nothing reads;
  - replace dense constants by a splat.
Works on kfuse-opt's printed form of one graph (what kf-random writes).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

NODE = re.compile(r"^  %([\w.$]+)(?::(\d+))? = (\w+)(.*)$")


def split_top(s):
    """Splits s at commas outside brackets and braces."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[{(<":
            depth += 1
        elif ch in "]})>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Graph:
    """One graph: name, params [(name, type)], nodes [(line, names, types)],
    results [value names] with their types."""

    def __init__(self, text):
        lines = [l for l in text.split("\n") if not l.startswith("#")]
        head = next(i for i, l in enumerate(lines) if l.startswith("graph @"))
        m = re.match(r"graph @([\w.$]+)\((.*)\) -> \((.*)\) \{$", lines[head])
        if not m:
            raise ValueError("not a one-graph kf file: " + lines[head][:80])
        self.name = m.group(1)
        self.params = [tuple(p.split(": ", 1)) for p in split_top(m.group(2))]
        rtypes = split_top(m.group(3))
        self.nodes = []
        self.results = []
        for l in lines[head + 1:]:
            if l.startswith("  return"):
                self.results = list(zip(split_top(l[len("  return"):]), rtypes))
                break
            nm = NODE.match(l)
            if not nm:
                raise ValueError("unexpected line: " + l[:80])
            k = int(nm.group(2) or 1)
            types = split_top(l.rsplit(" : ", 1)[1]) if " : " in l else []
            # a const's literal may hold ' : ' inside brackets; its type is last
            self.nodes.append((nm.group(1), k, l, types[-k:]))

    def text(self):
        ps = ", ".join("%s: %s" % p for p in self.params)
        rt = ", ".join(t for _, t in self.results)
        body = "\n".join(n[2] for n in self.nodes)
        ret = ", ".join(v for v, _ in self.results)
        return "graph @%s(%s) -> (%s) {\n%s\n  return %s\n}\n" % (self.name, ps, rt, body, ret)

    def copy(self):
        g = Graph.__new__(Graph)
        g.name, g.params, g.nodes, g.results = self.name, list(self.params), list(self.nodes), list(self.results)
        return g


def uses(line):
    rhs = line.split(" = ", 1)[1] if " = " in line else line
    return set(re.findall(r"%([\w.$]+)", rhs))


def dce(g):
    """Drops nodes whose results nothing reads, and unread params stay."""
    while True:
        used = set()
        for v, _ in g.results:
            used |= uses(v)
        for n in g.nodes:
            used |= uses(n[2])
        keep = [n for n in g.nodes if n[0] in used]
        if len(keep) == len(g.nodes):
            return g
        g.nodes = keep


def cut(g, names):
    """Each node named in names becomes graph inputs of its result types."""
    names = set(names)
    new_nodes = []
    rename = {}
    for name, k, line, types in g.nodes:
        if name not in names:
            new_nodes.append((name, k, line, types))
            continue
        if k == 1:
            g.params.append(("%" + name, types[0]))
        else:
            for i in range(k):
                g.params.append(("%%%s_%d" % (name, i), types[i]))
                rename["%%%s#%d" % (name, i)] = "%%%s_%d" % (name, i)
    g.nodes = new_nodes
    if rename:
        pat = re.compile("|".join(re.escape(r) + r"\b" for r in sorted(rename, key=len, reverse=True)))
        fix = lambda s: pat.sub(lambda m: rename[m.group(0)], s)
        g.nodes = [(a, b, fix(c), d) for a, b, c, d in g.nodes]
        g.results = [(fix(v), t) for v, t in g.results]
    return dce(g)


class Oracle:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="kf-reduce-")
        self.calls = 0

    def fails(self, g):
        self.calls += 1
        path = os.path.join(self.tmp, "c.kf")
        with open(path, "w") as f:
            f.write(g.text())
        cmd = [self.a.kf_random, "--check", path, "--pipeline", self.a.pipeline, "--expect", self.a.expect]
        if self.a.nvrtc:
            cmd.append("--nvrtc")
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        return r.returncode == 0


def ddmin(items, test):
    """The smallest subset of items (by ddmin) for which test(subset) holds;
    test(items) must hold."""
    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        done = False
        for i in range(len(parts)):
            rest = [x for j, p in enumerate(parts) if j != i for x in p]
            if rest and test(rest):
                items, n, done = rest, max(n - 1, 2), True
                break
        if not done:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


def reduce_graph(g, o):
    changed = True
    while changed:
        changed = False
        # results
        if len(g.results) > 1:
            def keep_results(sub):
                h = g.copy()
                h.results = sub
                return o.fails(dce(h))
            sub = ddmin(list(g.results), keep_results)
            if len(sub) < len(g.results):
                g.results = sub
                g = dce(g)
                changed = True
        # cut nodes into inputs: the complement kept as nodes
        names = [n[0] for n in g.nodes]

        def keep_nodes(sub):
            h = cut(g.copy(), set(names) - set(sub))
            return o.fails(h)
        sub = ddmin(names, keep_nodes)
        if len(sub) < len(names):
            g = cut(g, set(names) - set(sub))
            changed = True
        # dense constants to splats
        for i, n in enumerate(g.nodes):
            if " = const dense<" in n[2] and "dense<[" in n[2]:
                h = g.copy()
                line = re.sub(r"dense<\[.*\]>", "dense<1.0>" if "f" in n[3][0][:1] or "bf" in n[3][0] else "dense<1>",
                              n[2])
                h.nodes[i] = (n[0], n[1], line, n[3])
                if o.fails(h):
                    g = h
                    changed = True
        # unread params
        used = set()
        for v, _ in g.results:
            used |= uses(v)
        for n in g.nodes:
            used |= uses(n[2])
        g.params = [p for p in g.params if p[0].lstrip("%") in used]
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("finding")
    ap.add_argument("--kf-random", default=None, help="the kf-random binary (default: the newest build*/tests/random/kf-random)")
    ap.add_argument("--pipeline")
    ap.add_argument("--expect")
    ap.add_argument("--nvrtc", action="store_true", help="compile the kernels in each check")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    text = open(a.finding).read()
    if not a.pipeline:
        m = re.search(r"^# PIPELINE: (.*)$", text, re.M)
        if not m:
            sys.exit("reduce.py: no --pipeline and no '# PIPELINE:' line in " + a.finding)
        a.pipeline = m.group(1)
    if not a.expect:
        m = re.search(r"^# kf-random finding: (\w+)", text, re.M)
        if not m:
            sys.exit("reduce.py: no --expect and no '# kf-random finding:' line in " + a.finding)
        a.expect = m.group(1)
    if a.expect in ("emit", "nvrtc"):
        a.nvrtc = True
    if not a.kf_random:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        cands = [os.path.join(root, d, "tests/random/kf-random") for d in os.listdir(root) if d.startswith("build")]
        cands = [c for c in cands if os.path.exists(c)]
        if not cands:
            sys.exit("reduce.py: no kf-random found; give --kf-random")
        a.kf_random = max(cands, key=os.path.getmtime)
    o = Oracle(a)
    g = Graph(text)
    if not o.fails(g):
        sys.exit("reduce.py: %s does not fail with '%s' under %s" % (a.finding, a.expect, a.pipeline))
    n0 = len(g.nodes)
    g = reduce_graph(g, o)
    out = "# kf-random finding: %s, reduced from %d to %d nodes\n# PIPELINE: %s\n%s" % (
        a.expect, n0, len(g.nodes), a.pipeline, g.text())
    if a.out:
        with open(a.out, "w") as f:
            f.write(out)
    else:
        sys.stdout.write(out)
    print("reduce.py: %d -> %d nodes in %d checks" % (n0, len(g.nodes), o.calls), file=sys.stderr)


if __name__ == "__main__":
    main()
