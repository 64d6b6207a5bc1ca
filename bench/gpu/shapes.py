#!/usr/bin/env python3
"""The zoo's contraction shapes (bench/gpu/shapes.txt) for shapes.sh:

    shapes.py gen DIR DTYPE [REGEX]    one .kf graph per case (DIR/NAME.DTYPE.kf) and
                                       all of them in one graph (DIR/all.DTYPE.kf, for
                                       one tuning run); prints the case names
    shapes.py torch DTYPE [REGEX]      PyTorch on the GPU: the product alone (cuBLAS),
                                       eager, torch.compile; JSON lines (median ms)
    shapes.py table RESULTS TORCH      the table: every variant's time, TFLOP/s and
                                       GB/s, ratios, the bars of issue 19

gen needs no PyTorch (the .kf text is written here); torch and table run on
the GPU machine.
"""
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cases(regex=None):
    out = []
    for line in open(os.path.join(HERE, "shapes.txt")):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        name, models, batch, M, N, K, lay, epi = line
        if regex and not re.search(regex, name):
            continue
        bd = [] if batch == "-" else [int(b) for b in batch.split("x")]
        out.append(dict(name=name, models=models, batch=bd, M=int(M), N=int(N), K=int(K), nk=lay == "nk", epi=epi,
                        bbatch=len(bd) > 1))  # two batch dims: attention, both operands batched
    return out


def dims(d):
    return ",".join(str(x) for x in d)


def inputs(c):
    """The graph's inputs: (name, shape)."""
    b, M, N, K = c["batch"], c["M"], c["N"], c["K"]
    wb = b if c["bbatch"] else []
    ins = [("x", b + [M, K]), ("w", wb + ([N, K] if c["nk"] else [K, N]))]
    e = c["epi"]
    if e.startswith("bias"):
        ins.append(("b", [N]))
    if e in ("residual", "bias_residual", "silu_mul"):
        ins.append(("r", b + [M, N]))
    if e == "scale_mask":
        ins.append(("mask", [1, 1, M, N]))
    return ins


def kf_body(c, dt, p=""):
    """The ops of case c (value names prefixed p), its inputs p-prefixed."""
    b, M, N, K = c["batch"], c["M"], c["N"], c["K"]
    o = f"{dt}[{dims(b + [M, N])}]"
    L = []
    w = f"%{p}w"
    if c["nk"]:
        wb = b if c["bbatch"] else []
        r = len(wb) + 2
        perm = list(range(r - 2)) + [r - 1, r - 2]
        L.append(f"%{p}t = transpose(%{p}w) {{perm = [{', '.join(map(str, perm))}]}} : {dt}[{dims(wb + [K, N])}]")
        w = f"%{p}t"
    L.append(f"%{p}m = matmul(%{p}x, {w}) : {o}")
    e, y = c["epi"], f"%{p}m"
    if e.startswith("bias"):
        L.append(f"%{p}a = add({y}, %{p}b) : {o}")
        y = f"%{p}a"
    if e == "bias_gelu":
        L.append(f"%{p}g = gelu({y}) : {o}")
        y = f"%{p}g"
    elif e == "bias_gelu_tanh":
        L.append(f'%{p}g = gelu({y}) {{approximate = "tanh"}} : {o}')
        y = f"%{p}g"
    elif e in ("residual", "bias_residual"):
        L.append(f"%{p}s = add(%{p}r, {y}) : {o}")
        y = f"%{p}s"
    elif e == "scale_mask":
        L.append(f"%{p}c = const {math.sqrt(K)!r} : {dt}[]")
        L.append(f"%{p}d = div({y}, %{p}c) : {o}")
        L.append(f"%{p}s = add(%{p}mask, %{p}d) : {o}")
        y = f"%{p}s"
    elif e == "silu_mul":
        L.append(f"%{p}g = silu({y}) : {o}")
        L.append(f"%{p}s = mul(%{p}g, %{p}r) : {o}")
        y = f"%{p}s"
    return L, y, o


def gen(d, dt, regex):
    cs = cases(regex)
    os.makedirs(d, exist_ok=True)
    allin, allops, allys, allts = [], [], [], []
    for i, c in enumerate(cs):
        ins = inputs(c)
        L, y, o = kf_body(c, dt)
        sig = ", ".join(f"%{n}: {dt}[{dims(s)}]" for n, s in ins)
        with open(f"{d}/{c['name']}.{dt}.kf", "w") as f:
            f.write(f"graph @{c['name'].replace('.', '_')}({sig}) -> ({o}) {{\n")
            f.write("".join(f"  {l}\n" for l in L))
            f.write(f"  return {y}\n}}\n")
        p = f"c{i}_"
        L, y, o = kf_body(c, dt, p)
        allin += [f"%{p}{n}: {dt}[{dims(s)}]" for n, s in ins]
        allops += L
        allys.append(y)
        allts.append(o)
        print(c["name"])
    with open(f"{d}/all.{dt}.kf", "w") as f:
        f.write(f"graph @all({', '.join(allin)}) -> ({', '.join(allts)}) {{\n")
        f.write("".join(f"  {l}\n" for l in allops))
        f.write(f"  return {', '.join(allys)}\n}}\n")


def flops_bytes(c, dt):
    """FLOP of the product; bytes every kernel must move at least (operands,
    epilogue inputs and the result once)."""
    nb = math.prod(c["batch"]) if c["batch"] else 1
    es = 2 if dt in ("f16", "bf16") else 4
    fl = 2 * nb * c["M"] * c["N"] * c["K"]
    by = sum(math.prod(s) for _, s in inputs(c)) * es + nb * c["M"] * c["N"] * es
    return fl, by


def torch_run(dt, regex):
    import torch
    sys.path.insert(0, HERE)
    from timing import do_bench
    torch.backends.cuda.matmul.allow_tf32 = False
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dt]
    F = torch.nn.functional
    for c in cases(regex):
        ins = {n: torch.randn(*s, device="cuda", dtype=tdt) for n, s in inputs(c)}
        K, e = c["K"], c["epi"]

        def mm(a):
            w = a["w"].transpose(-1, -2) if c["nk"] else a["w"]
            return a["x"] @ w

        def fn(a):
            m = mm(a)
            if e.startswith("bias"):
                m = m + a["b"]
            if e == "bias_gelu":
                m = F.gelu(m)
            elif e == "bias_gelu_tanh":
                m = F.gelu(m, approximate="tanh")
            elif e in ("residual", "bias_residual"):
                m = a["r"] + m
            elif e == "scale_mask":
                m = a["mask"] + m / math.sqrt(K)
            elif e == "silu_mul":
                m = F.silu(m) * a["r"]
            return m

        variants = [("cublas", lambda: mm(ins)), ("eager", lambda: fn(ins))]
        if os.environ.get("SHAPES_COMPILE", "1") != "0":
            cf = torch.compile(fn)
            variants.append(("compile", lambda: cf(ins)))
        for v, f in variants:
            try:
                f()
                ms = do_bench(f, return_mode="median")
            except Exception as ex:  # no Triton, out of memory: say so and go on
                print(f"{c['name']} {dt} {v} failed: {ex}", file=sys.stderr)
                ms = math.nan
            print(json.dumps(dict(name=c["name"], dt=dt, variant=v, ms=ms)), flush=True)
        torch._dynamo.reset()
    n = 1 << 28
    a = torch.empty(n, device="cuda", dtype=torch.float32)
    b = torch.empty_like(a)
    ms = do_bench(lambda: b.copy_(a), return_mode="median")
    print(json.dumps(dict(name="copy", dt="f32", variant="copy", ms=ms, gbs=2 * n * 4 / ms / 1e6)), flush=True)


def table(res, tj):
    """res: lines 'NAME DT VARIANT rc=.. ok=.. ms=.. route=..'; tj: torch JSON lines."""
    kf, th, copy = {}, {}, None
    for l in open(res):
        f = dict(kv.split("=", 1) for kv in l.split()[3:] if "=" in kv)
        n, dt, v = l.split()[:3]
        kf[(n, dt, v)] = f
    for l in open(tj) if os.path.exists(tj) else []:
        try:
            d = json.loads(l)
        except ValueError:
            continue
        if d["variant"] == "copy":
            copy = d["gbs"]
        else:
            th[(d["name"], d["dt"], d["variant"])] = d["ms"]
    cs = {c["name"]: c for c in cases()}

    def ms(n, dt, v):
        f = kf.get((n, dt, v))
        if not f or f.get("rc") != "0" or f.get("ok") != "1":
            return math.nan
        return float(f.get("ms", "nan"))

    print("copy ceiling: %s GB/s (torch, 1 GiB); kfuse: CUDA-graph replays, torch: do_bench, both after an "
          "L2 flush unless SHAPES_FLUSH=0" % ("%.0f" % copy if copy else "?"))
    hdr = ("case", "dt", "default us", "route", "TFLOP/s", "GB/s", "tuned us", "tile", "cublas+epi", "lt",
           "torch mm", "eager", "compile", "def/cb", "tun/cb", "def/tc", "check")
    print("%-16s %-4s %10s %-22s %8s %7s %9s %-20s %10s %8s %8s %8s %8s %6s %6s %6s %s" % hdr)
    rat = {"def": [], "tun": []}
    mem = []
    names = sorted({k[:2] for k in kf}, key=lambda k: (k[1], list(cs).index(k[0]) if k[0] in cs else 0))
    for n, dt in names:
        c = cs.get(n)
        if not c:
            continue
        fl, by = flops_bytes(c, dt)
        d, t, cb = ms(n, dt, "default"), ms(n, dt, "tuned"), ms(n, dt, "cublas")
        lt = ms(n, dt, "cublaslt")
        base = min(x for x in (cb, lt) if x == x) if (cb == cb or lt == lt) else math.nan
        r1, r2 = base / d if d == d else math.nan, base / t if t == t else math.nan
        rt = th.get((n, dt, "compile"), math.nan)
        checks = "".join("ok " if kf.get((n, dt, v), {}).get("ok") == "1" else
                         ("-- " if (n, dt, v) not in kf else "BAD ") for v in ("default", "tuned", "cublas", "cublaslt"))
        print("%-16s %-4s %10.2f %-22s %8.1f %7.0f %9.2f %-20s %10.2f %8.2f %8.2f %8.2f %8.2f %6.2f %6.2f %6.2f %s" % (
            n, dt, d * 1e3, kf.get((n, dt, "default"), {}).get("route", "?")[:22], fl / (d * 1e9) if d == d else 0,
            by / (d * 1e6) if d == d else 0, t * 1e3, kf.get((n, dt, "tuned"), {}).get("route", "?")[:20], cb * 1e3,
            lt * 1e3, th.get((n, dt, "cublas"), math.nan) * 1e3, th.get((n, dt, "eager"), math.nan) * 1e3,
            rt * 1e3, r1, r2, (rt / d) if d == d else math.nan, checks))
        rat["def"].append(r1)
        rat["tun"].append(r2)
        # memory-bound: below the ridge (H200: ~990 TFLOP/s f16 dense, ~67 f32;
        # 4.8 TB/s) and big enough that moving the bytes takes 4 us at copy
        # speed (below that a launch and a wave of tiles are the time:
        # latency-bound, no bandwidth bar)
        ridge = (990e12 if dt != "f32" else 67e12) / 4.8e12
        if fl / by < ridge and d == d and copy and by / (copy * 1e3) >= 4.0:
            mem.append((n, dt, by / (d * 1e6) / copy))
    for k, v in rat.items():
        v = [x for x in v if x == x]
        if v:  # a route that is the cuBLAS variant itself reads 1.00 +- the runs' noise: 0.98 is level
            print("%s vs cuBLAS+epilogue: %d cases, >= 1.0x on %d, >= 0.98x (level) on %d (%.0f%%), "
                  "below 0.9x on %d, min %.2fx" % (
                      "default" if k == "def" else "tuned", len(v), sum(x >= 1.0 for x in v),
                      sum(x >= 0.98 for x in v), 100.0 * sum(x >= 0.98 for x in v) / len(v),
                      sum(x < 0.9 for x in v), min(v)))
    if mem:
        print("memory-bound (below the ridge): %d cases, >= 85%% of copy on %d; %s" % (
            len(mem), sum(m[2] >= 0.85 for m in mem), ", ".join("%s.%s %.0f%%" % (a, b, 100 * x) for a, b, x in mem)))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "gen":
        gen(a[1], a[2], a[3] if len(a) > 3 else None)
    elif len(a) >= 2 and a[0] == "torch":
        torch_run(a[1], a[2] if len(a) > 2 else None)
    elif len(a) == 3 and a[0] == "table":
        table(a[1], a[2])
    else:
        sys.exit(__doc__)
