#!/usr/bin/env python3
"""kfuse-diff at scale: two 200k-node graphs that differ in one attribute,
with every value renamed on one side.  kfuse-diff must name that attribute
(and only it) and finish within the time limit given.

The limit is on the CPU time kfuse-diff takes (user + system): on a loaded
machine the wall time also counts the wait for a core, which says nothing
about kfuse-diff.  Both are printed."""
import os, resource, subprocess, sys, tempfile, time

def graph(n, prefix, flip):
    lines = ["graph @big(%x: f32[1024], %b: f32[1024]) -> (f32[1024]) {"]
    prev, k = "%x", 0
    ops = ["add", "mul", "gelu", "sub", "tanh"]
    for i in range(n):
        v = f"%{prefix}{i}"
        op = ops[i % len(ops)]
        if op == "gelu":
            ap = "none" if (i == flip) else "tanh"
            lines.append(f'  {v} = gelu({prev}) {{approximate = "{ap}"}} : f32[1024]')
        elif op == "tanh":
            lines.append(f"  {v} = tanh({prev}) : f32[1024]")
        else:
            lines.append(f"  {v} = {op}({prev}, %b) : f32[1024]")
        prev = v
    lines.append(f"  return {prev}")
    lines.append("}")
    return "\n".join(lines) + "\n"

def main():
    tool, limit = sys.argv[1], float(sys.argv[2])
    n, flip = 200_000, 123_457  # a gelu node: 123457 % 5 == 2
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "a.kf"), os.path.join(d, "b.kf")
        open(a, "w").write(graph(n, "v", -1))
        open(b, "w").write(graph(n, "renamed_", flip))
        same = subprocess.run([tool, a, a], capture_output=True, text=True)
        assert same.returncode == 0, same.stdout + same.stderr
        # the best of three runs: a run that shared its core with a
        # compiler (the suite runs in parallel) takes longer in CPU time too
        best = None
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            r = subprocess.run([tool, a, b], capture_output=True, text=True)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            dt = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            out = r.stdout
            print(out, r.stderr, f"CPU time {dt:.3f} s (limit {limit} s), wall {wall:.3f} s")
            assert r.returncode == 1, f"exit {r.returncode}"
            assert "difference 1: attributes differ" in out
            assert f"a.kf:{flip + 2}:" in out and f"b.kf:{flip + 2}:" in out
            assert "attribute 'approximate': \"tanh\" vs \"none\"" in out
            assert "difference 2" not in out
            best = dt if best is None else min(best, dt)
            if best < limit:
                break
        assert best < limit, f"took {best:.3f} s at best, limit {limit} s"

main()
