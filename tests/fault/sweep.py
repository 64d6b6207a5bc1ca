#!/usr/bin/env python3
"""The allocation-failure sweep: every tool path with its Nth allocation
failing (KF_FAULT_ALLOC=N, core/fault.c), as SQLite's and Lua's test suites
do.  Out of memory must never crash, never leave a sanitizer report, and
never corrupt an output:

  - the exit status is 0 or the tool's error status, never a signal;
  - stderr has no sanitizer report; a failure says why (an error message);
  - exit 0: the outputs are exactly those of the run without a fault
    (a failure in a path that can recover must really recover);
  - otherwise the output file is as it was before the run (a sentinel text
    that must survive) and no temporary is left beside it.

    sweep.py --build-dir BUILD [--seconds S] [--all] [--only NAME]

Each scenario first runs once with KF_FAULT_COUNT=1 to learn how many
allocations it makes (A).  With --all every N in 1..A is tried; otherwise N
is sampled, evenly and at random, until the scenario's share of --seconds
is spent (CI).  Every tried N is also tried as "N+" (every allocation from
the Nth on fails) when --all.  Exit 0 when every run passed."""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTINEL = "sentinel: a previous output that a failed run must leave alone\n"
BAD = re.compile(rb"AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer|"
                 rb"Segmentation fault|core dumped")


def scenarios(b):
    """(name, argv with OUT for the output path or None, error exit statuses)"""
    onnx = os.path.join(b, "onnx", "kfuse-import-onnx")
    kf = os.path.join(SRC, "tests", "golden", "rules", "gelu.kf")
    s = [
        ("opt-print", [f"{b}/kfuse-opt", f"{SRC}/examples/mlp.kf", "-o", "OUT"], {1}),
        ("opt-rules-fuse", [f"{b}/kfuse-opt", kf, "-p", f"canonicalize,cse,rules{{path={SRC}/patterns}},fuse,dce",
                            "-o", "OUT"], {1}),
        ("opt-equivalence", [f"{b}/kfuse-opt", f"{SRC}/examples/mlp.kf", "-p", "canonicalize,fuse",
                             "--check-equivalence", "-o", "OUT"], {1}),
        ("run", [f"{b}/kfuse-run", f"{SRC}/examples/mlp.kf", "--random-inputs", "--output-dir", "OUTDIR"], {1}),
        ("check", [f"{b}/kfuse-check", f"{SRC}/tests/golden/check/substitutions.kf", "--input-file",
                   f"{SRC}/tests/golden/check/substitutions.kf", "--check-prefix=CHECK"], {1, 2}),
        ("diff", [f"{b}/kfuse-diff", kf, kf], {1, 2}),
        ("verify-rules", [f"{b}/kfuse-verify-rules", f"{SRC}/tests/rules/sandbox"], {1}),
    ]
    if os.path.exists(onnx):
        s.append(("import-onnx", [onnx, f"{SRC}/examples/onnx/ffn.onnx", "-o", "OUT"], {1}))
    return s


def run(argv, env, tmp):
    out = os.path.join(tmp, "out.kf")
    outdir = os.path.join(tmp, "outdir")
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    for f in os.listdir(tmp):
        p = os.path.join(tmp, f)
        if os.path.isdir(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    with open(out, "w") as f:
        f.write(SENTINEL)
    os.mkdir(outdir)
    with open(os.path.join(outdir, "out0.npy"), "w") as f:
        f.write(SENTINEL)
    args = [out if a == "OUT" else outdir if a == "OUTDIR" else a for a in argv]
    p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, cwd=tmp)
    files = {}
    for root, _, names in os.walk(tmp):
        for n in names:
            path = os.path.join(root, n)
            with open(path, "rb") as f:
                files[os.path.relpath(path, tmp)] = f.read()
    return p.returncode, p.stdout, p.stderr, files


def count(argv, env, tmp):
    e = dict(env, KF_FAULT_COUNT="1")
    rc, out, err, files = run(argv, e, tmp)
    m = re.search(rb"kfuse-fault: (\d+) allocations", err)
    return rc, out, files, int(m.group(1)) if m else 0


def check_one(name, argv, errs, env, tmp, ref, n):
    """None when run n passed, else why not."""
    rc, out, err, files = run(argv, env, tmp)
    if rc < 0 or rc not in errs | {0}:
        return f"exit status {rc}"
    if BAD.search(err):
        return "a sanitizer report:\n" + err.decode(errors="replace")[-2000:]
    if rc == 0:
        if out != ref[1] or files != ref[2]:
            return "exit 0 but the outputs differ from the run without a fault"
        return None
    if b"error" not in err and b"fatal" not in err:
        return "failed without saying why: " + err.decode(errors="replace")[-500:]
    for path, data in files.items():
        if ".tmp." in path:
            return f"a temporary was left behind: {path}"
    if files.get("out.kf") != SENTINEL.encode() and "out.kf" in ref[2] and files.get("out.kf") != ref[2]["out.kf"]:
        return "the output was changed by a failed run"
    for path, data in files.items():
        if path.startswith("outdir/") and data != SENTINEL.encode() and data != ref[2].get(path):
            return f"{path} is neither the old file nor the complete new one"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    b = os.path.abspath(a.build_dir)
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    env.pop("KF_FAULT_ALLOC", None)
    env.pop("KF_FAULT_WRITE", None)
    sc = [s for s in scenarios(b) if not a.only or a.only in s[0]]
    rnd = random.Random(a.seed)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kf-sweep-") as tmp:
        for name, argv, errs in sc:
            rc, out, files, nalloc = count(argv, env, tmp)
            if rc != 0 or nalloc == 0:
                print(f"{name}: the run without a fault failed (exit {rc}, {nalloc} allocations counted)")
                failures += 1
                continue
            ref = (rc, out, files)
            if a.all:
                todo = [str(n) for n in range(1, nalloc + 1)] + [f"{n}+" for n in range(1, nalloc + 1)]
            else:
                # the first and last ones, then evenly spread, then at random
                k = 64
                even = sorted({1 + (nalloc - 1) * i // (k - 1) for i in range(k)} | {1, nalloc})
                todo = [str(n) for n in even] + [f"{n}+" for n in even[::4]]
                todo += [str(rnd.randint(1, nalloc)) for _ in range(4 * k)]
            t0, done, bad = time.time(), 0, 0
            share = a.seconds / len(sc)
            for n in todo:
                if not a.all and time.time() - t0 > share:
                    break
                why = check_one(name, argv, errs, dict(env, KF_FAULT_ALLOC=n), tmp, ref, n)
                done += 1
                if why:
                    bad += 1
                    if bad <= 5:
                        print(f"FAIL {name} KF_FAULT_ALLOC={n}: {why}")
            print(f"{name}: {nalloc} allocations; {done} faulty runs, {bad} failed ({time.time() - t0:.1f} s)")
            failures += bad
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
