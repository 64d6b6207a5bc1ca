#!/usr/bin/env python3
"""The zoo's contraction shapes for shapes.sh, two sources:

  the zoo itself: every distinct contraction kernel (fusion {kind =
  "contraction"}) of the zoo's models as kfuse fuses them (bench/models/
  zoo.py --full, kfuse-import-onnx, the standard pipeline), cut out of the
  fused graph with its body as it is (extract);
  bench/gpu/shapes.txt: the same models' shapes written from their configs
  (gen), for a machine without the zoo.

    shapes.py extract DIR DTYPE MODEL=FUSED.kf...
                                       the distinct contraction kernels of the fused
                                       graphs, each its own graph DIR/zoo.MODEL.K.DTYPE.kf,
                                       their bodies in DIR/zoo-DTYPE.json; prints the names
    shapes.py gen DIR DTYPE [REGEX]    shapes.txt's cases as .kf graphs (DIR/NAME.DTYPE.kf)
    shapes.py all DIR DTYPE NAME...    the named cases in one graph (DIR/all.DTYPE.kf, for
                                       one tuning run)
    shapes.py torch DIR DTYPE [REGEX]  PyTorch on the GPU: the product alone (cuBLAS),
                                       eager, torch.compile of each case (an extracted
                                       body translated op by op); JSON lines (median ms)
    shapes.py table DIR RESULTS TORCH  the table: every variant's time, TFLOP/s and
                                       GB/s, ratios, the bars of issue 19

extract, gen and all need no PyTorch; torch and table run on the GPU machine.
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
    os.makedirs(d, exist_ok=True)
    for c in cases(regex):
        ins = inputs(c)
        L, y, o = kf_body(c, dt)
        sig = ", ".join(f"%{n}: {dt}[{dims(s)}]" for n, s in ins)
        with open(f"{d}/{c['name']}.{dt}.kf", "w") as f:
            f.write(f"graph @{c['name'].replace('.', '_')}({sig}) -> ({o}) {{\n")
            f.write("".join(f"  {l}\n" for l in L))
            f.write(f"  return {y}\n}}\n")
        print(c["name"])


# ---- the fused zoo: contraction kernels cut out ---------------------------------------------

TYPE = re.compile(r"([a-z0-9]+)\[([^\]]*)\]")
NAME = re.compile(r"%([A-Za-z0-9_.]+)")


def parse_type(t):
    m = TYPE.fullmatch(t.strip())
    return m.group(1), [int(x) for x in m.group(2).split(",") if x.strip()]


def split_top(s):
    """s split at commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in s:
        depth += ch in "[(<{"
        depth -= ch in "])>}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def contraction_blocks(text):
    """(result types, region args, body lines) of each contraction fusion."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        l = lines[i]
        if " = fusion @" in l and 'kind = "contraction"' in l and l.rstrip().endswith("{"):
            res = split_top(l.rsplit(" : ", 1)[1].rstrip(" {"))
            args = split_top(lines[i + 1].strip()[2:-2])  # ^(...):
            body, j = [], i + 2
            while lines[j].strip() != "}":
                body.append(lines[j].strip())
                j += 1
            yield res, [(a.split(":", 1)[0].strip(), a.split(":", 1)[1].strip()) for a in args], body
            i = j
        i += 1


def canonical(args, body):
    """The block with its values renamed in order of appearance and its
    constants' values dropped (a layer's bias copied into the body): equal
    for the same kernel in another layer, which runs the same time."""
    names = {}

    def ren(m):
        return "%" + names.setdefault(m.group(1), "v%d" % len(names))
    text = " ".join(a + ":" + t for a, t in args) + "|" + "|".join(body)
    text = re.sub(r"const [^:]*:", "const:", text)
    return NAME.sub(ren, text)


def contraction_of(body):
    """(op, operand values, result type) of the body's matmul or gemm."""
    for l in body:
        m = re.match(r"%(\S+) = (matmul|gemm)\((.*?)\)( \{.*\})? : (.*)$", l)
        if m:
            return m.group(2), [x.strip()[1:] for x in m.group(3).split(",")], m.group(5), m.group(4) or ""
    return None


def flop_bytes_block(args, body, res):
    typ = {a[1:]: parse_type(t) for a, t in args}
    for l in body:
        m = re.match(r"%(\S+) = .* : (.*)$", l)
        if m:
            typ[m.group(1)] = parse_type(m.group(2))
    op, ins, rt, attrs = contraction_of(body)
    (adt, ash), (bdt, bsh) = typ[ins[0]], typ[ins[1]]
    _, osh = parse_type(rt)
    k = ash[-1] if len(ash) > 1 and "trans_a = 1" not in attrs else ash[-2] if len(ash) > 1 else ash[0]
    es = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}
    fl = 2 * math.prod(osh) * k
    by = sum(math.prod(parse_type(t)[1]) * es.get(parse_type(t)[0], 4) for _, t in args)
    by += sum(math.prod(parse_type(t)[1]) * es.get(parse_type(t)[0], 4) for t in res)
    return fl, by, "x".join(map(str, osh)) + "x" + str(k)


def extract(d, dt, pairs):
    os.makedirs(d, exist_ok=True)
    seen, info = {}, []
    for pair in pairs:
        model, path = pair.split("=", 1)
        k = 0
        for res, args, body in contraction_blocks(open(path).read()):
            key = canonical(args, body) + "->" + ",".join(res)
            if key in seen:
                seen[key]["models"].add(model)
                continue
            name = f"zoo.{model}.{k}"
            k += 1
            fl, by, shape = flop_bytes_block(args, body, res)
            e = dict(name=name, models={model}, args=args, body=body, res=res, flops=fl, bytes=by, shape=shape)
            seen[key] = e
            info.append(e)
            params = ", ".join(f"%p{i}: {t}" for i, (_, t) in enumerate(args))
            r = "%r" if len(res) == 1 else f"%r:{len(res)}"
            rets = "%r" if len(res) == 1 else ", ".join(f"%r#{i}" for i in range(len(res)))
            with open(f"{d}/{name}.{dt}.kf", "w") as f:
                f.write(f"graph @{name.replace('.', '_')}({params}) -> ({', '.join(res)}) {{\n")
                f.write(f"  {r} = fusion @m0({', '.join(f'%p{i}' for i in range(len(args)))}) "
                        f"{{kind = \"contraction\"}} : {', '.join(res)} {{\n")
                f.write(f"  ^({', '.join(a + ': ' + t for a, t in args)}):\n")
                f.write("".join(f"    {l}\n" for l in body))
                f.write(f"  }}\n  return {rets}\n}}\n")
            print(name)
    for e in info:
        e["models"] = sorted(e["models"])
    json.dump(info, open(f"{d}/zoo-{dt}.json", "w"), indent=0)


def all_graph(d, dt, names):
    """The named case graphs in one graph, each case's values prefixed."""
    ins, ops, rets, rts = [], [], [], []
    for i, n in enumerate(names):
        text = open(f"{d}/{n}.{dt}.kf").read()
        head, rest = text.split("\n", 1)
        m = re.match(r"graph @\S+\((.*)\) -> \((.*)\) \{$", head)
        body = rest.rsplit("}", 1)[0].splitlines()
        p = f"c{i}_"
        ren = lambda s: NAME.sub(lambda x: "%" + p + x.group(1), s).replace("fusion @m0(", f"fusion @m{i}(")  # noqa: E731
        ins += [ren(a) for a in split_top(m.group(1))]
        rts += split_top(m.group(2))
        for l in body:
            if l.strip().startswith("return "):
                rets += [ren(x) for x in split_top(l.strip()[7:])]
            elif l.lstrip().startswith("^(") or l.startswith("    "):
                ops.append(l)  # region lines: names are the region's own
            else:
                ops.append(ren(l))
    with open(f"{d}/all.{dt}.kf", "w") as f:
        f.write(f"graph @all({', '.join(ins)}) -> ({', '.join(rts)}) {{\n")
        f.write("".join(l + "\n" for l in ops))
        f.write(f"  return {', '.join(rets)}\n}}\n")


def body_fn(args, body):
    """A function of torch tensors (one per region arg) computing the body
    (op by op, as kfuse's interpreter reads it); KeyError for an op it
    does not know."""
    import torch
    F = torch.nn.functional
    TD = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
          "i1": torch.bool, "i32": torch.int32, "i64": torch.int64, "i8": torch.int8}
    steps = []
    for l in body:
        if l.startswith("yield "):
            outs = [x.strip()[1:] for x in l[6:].split(",")]
            continue
        m = re.match(r"%(\S+) = (\w+)(\((.*?)\))?( \{(.*)\})? : (.*)$", l)
        if not m:
            m = re.match(r"%(\S+) = const (.*) : (.*)$", l)
            dt, shape = parse_type(m.group(3))
            lit = m.group(2)
            if lit.startswith("dense<"):
                v = json.loads(lit[6:-1])
                steps.append((m.group(1), "const", (v, TD[dt], shape), {}))
            else:
                steps.append((m.group(1), "const", (float(lit), TD[dt], shape), {}))
            continue
        name, op, ins, attrs, rt = m.group(1), m.group(2), m.group(4) or "", m.group(6) or "", m.group(7)
        at = dict((k.strip(), v.strip().strip('"')) for k, v in (a.split("=", 1) for a in split_top(attrs) if "=" in a))
        steps.append((name, op, [x.strip()[1:] for x in split_top(ins)], dict(at, _rt=rt)))
    unary = {"relu": F.relu, "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "neg": torch.neg,
             "exp": torch.exp, "erf": torch.erf, "sqrt": torch.sqrt, "abs": torch.abs, "log": torch.log}
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
              "max": torch.maximum, "min": torch.minimum}
    for _, op, _, _ in steps:
        if op not in unary and op not in binary and op not in ("const", "matmul", "gemm", "where", "gelu", "cast",
                                                                 "transpose"):
            raise KeyError(op)
    names = [a[1:] for a, _ in args]

    def fn(*xs):
        env = dict(zip(names, xs))
        for name, op, ins, at in steps:
            if op == "const":
                # through f64 and f32 as the text's literals round (-3.4028235e+38
                # is f32's largest, a hair above it in f64)
                v, td, shape = ins
                t = torch.tensor(v, dtype=torch.float64)
                if td != torch.bool and td.is_floating_point:
                    t = t.to(torch.float32)
                env[name] = t.to(td).to(xs[0].device).expand(shape).contiguous() if not shape or t.dim() == 0 \
                    else t.to(td).to(xs[0].device)
                continue
            a = [env[i] for i in ins]
            if op == "matmul":
                r = a[0] @ a[1]
            elif op == "gemm":
                x = a[0].transpose(-1, -2) if at.get("trans_a") == "1" else a[0]
                w = a[1].transpose(-1, -2) if at.get("trans_b") == "1" else a[1]
                r = float(at.get("alpha", 1.0)) * (x @ w)
                if len(a) > 2:
                    r = r + float(at.get("beta", 1.0)) * a[2]
            elif op == "where":
                r = torch.where(a[0], a[1], a[2])
            elif op == "gelu":
                r = F.gelu(a[0], approximate="tanh" if at.get("approximate") == "tanh" else "none")
            elif op == "cast":
                r = a[0].to(TD[at["to"]])
            elif op == "transpose":
                r = a[0].permute(*[int(x) for x in at["perm"].strip("[]").split(",")])
            elif op in unary:
                r = unary[op](a[0])
            else:
                r = binary[op](a[0], a[1])
            env[name] = r
        return [env[o] for o in outs]
    return fn


def flops_bytes(c, dt):
    """FLOP of the product; bytes every kernel must move at least (operands,
    epilogue inputs and the result once)."""
    nb = math.prod(c["batch"]) if c["batch"] else 1
    es = 2 if dt in ("f16", "bf16") else 4
    fl = 2 * nb * c["M"] * c["N"] * c["K"]
    by = sum(math.prod(s) for _, s in inputs(c)) * es + nb * c["M"] * c["N"] * es
    return fl, by


def torch_zoo(d, dt, regex, do_bench):
    """The extracted cases: each body as torch ops, eager and compiled."""
    import torch
    path = f"{d}/zoo-{dt}.json"
    for e in json.load(open(path)) if os.path.exists(path) else []:
        if regex and not re.search(regex, e["name"]):
            continue
        TD = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
        try:
            fn = body_fn(e["args"], e["body"])
            xs = []
            for _, t in e["args"]:
                tdt, shape = parse_type(t)
                xs.append(torch.randn(*shape, device="cuda", dtype=TD[tdt]) if tdt in TD else
                          torch.zeros(*shape, device="cuda").to(torch.bool if tdt == "i1" else torch.int64))
            op, ins, _, _ = contraction_of(e["body"])
        except (KeyError, ValueError, AttributeError, TypeError) as ex:
            print(f"{e['name']} {dt}: no torch translation ({ex})", file=sys.stderr)
            continue
        variants = [("eager", lambda: fn(*xs))]
        if os.environ.get("SHAPES_COMPILE", "1") != "0":
            cf = torch.compile(fn)
            variants.append(("compile", lambda: cf(*xs)))
        for v, f in variants:
            try:
                f()
                ms = do_bench(f, return_mode="median")
            except Exception as ex:  # no Triton, out of memory: say so and go on
                print(f"{e['name']} {dt} {v} failed: {ex}", file=sys.stderr)
                ms = math.nan
            print(json.dumps(dict(name=e["name"], dt=dt, variant=v, ms=ms)), flush=True)
        torch._dynamo.reset()
        # a copy of the case's own bytes (half read, half written: its bytes
        # in all), the rate a kernel of that size can reach from a cold L2,
        # launch and ramp included; beside the 1 GiB ceiling for the
        # memory-bound cases
        if e.get("bytes", 0) >= 8 << 20:
            ca = torch.empty(e["bytes"] // 4, device="cuda", dtype=torch.float16)
            cb = torch.empty_like(ca)
            ms = do_bench(lambda: cb.copy_(ca), return_mode="median")
            print(json.dumps(dict(name=e["name"], dt=dt, variant="samecopy", ms=ms)), flush=True)
            del ca, cb


def torch_run(d, dt, regex):
    import torch
    sys.path.insert(0, HERE)
    from timing import do_bench
    torch.backends.cuda.matmul.allow_tf32 = False
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dt]
    F = torch.nn.functional
    torch_zoo(d, dt, regex, do_bench)
    for c in cases(regex):
        if not os.path.exists(f"{d}/{c['name']}.{dt}.kf"):  # not in this run
            continue
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


def table(d, res, tj):
    """res: lines 'NAME DT VARIANT rc=.. ok=.. ms=.. route=..'; tj: torch JSON
    lines; d: the graphs' directory (zoo-DT.json: the extracted cases)."""
    kf, th, copy = {}, {}, None
    for l in open(res):
        f = dict(kv.split("=", 1) for kv in l.split()[3:] if "=" in kv)
        n, dt, v = l.split()[:3]
        kf[(n, dt, v)] = f
    for l in open(tj) if os.path.exists(tj) else []:
        try:
            j = json.loads(l)
        except ValueError:
            continue
        if j["variant"] == "copy":
            copy = j["gbs"]
        else:
            th[(j["name"], j["dt"], j["variant"])] = j["ms"]
    cs = {c["name"]: c for c in cases()}
    zoo = {}
    for dt in ("f16", "bf16", "f32"):
        if os.path.exists(f"{d}/zoo-{dt}.json"):
            zoo.update({(e["name"], dt): e for e in json.load(open(f"{d}/zoo-{dt}.json"))})
    order = list(cs) + sorted({k[0] for k in zoo})

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
    for (n, dt), e in sorted(zoo.items()):
        print("  %s %s: %s, %s; %s" % (n, dt, e["shape"], ",".join(e["models"]),
                                       " ".join(l.split(" = ", 1)[1].split("(")[0] for l in e["body"]
                                                if " = " in l and " const " not in l)))
    rat = {"def": [], "tun": []}
    mem = []
    names = sorted({k[:2] for k in kf}, key=lambda k: (k[1], order.index(k[0]) if k[0] in order else 0))
    for n, dt in names:
        if (n, dt) in zoo:
            fl, by = zoo[(n, dt)]["flops"], zoo[(n, dt)]["bytes"]
        elif n in cs:
            fl, by = flops_bytes(cs[n], dt)
        else:
            continue
        d, t, cb = ms(n, dt, "default"), ms(n, dt, "tuned"), ms(n, dt, "cublas")
        # the cublaslt tile where cuBLASLt took the epilogue (else it fell to another route)
        lt = ms(n, dt, "cublaslt") if kf.get((n, dt, "cublaslt"), {}).get("route") == "cublaslt" else math.nan
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
        # the route of the faster library variant: a kfuse row on that very
        # route runs the same kernels, and its ratio is the runs' noise
        broute = kf.get((n, dt, "cublas" if base == cb else "cublaslt"), {}).get("route")
        same = {v: kf.get((n, dt, v), {}).get("route") == broute for v in ("default", "tuned")}
        rat["def"].append((r1, same["default"]))
        rat["tun"].append((r2, same["tuned"]))
        # memory-bound: below the ridge (H200: ~990 TFLOP/s f16 dense, ~67 f32;
        # 4.8 TB/s) and big enough that moving the bytes takes 4 us at copy
        # speed (below that a launch and a wave of tiles are the time:
        # latency-bound, no bandwidth bar)
        ridge = (990e12 if dt != "f32" else 67e12) / 4.8e12
        if fl / by < ridge and d == d and copy and by / (copy * 1e3) >= 4.0:
            mem.append((n, dt, by / (d * 1e6) / copy, th.get((n, dt, "samecopy"), math.nan) / d))
    for k, vs in rat.items():
        v = [x for x, _ in vs if x == x]
        if v:  # a route that is the cuBLAS variant itself reads 1.00 +- the runs' noise: 0.98 is level
            below = [(x, sm) for x, sm in vs if x == x and x < 1.0]
            print("%s vs cuBLAS+epilogue: %d cases, >= 1.0x on %d, >= 0.98x (level) on %d (%.0f%%), "
                  "below 0.9x on %d, min %.2fx; of the %d below 1.0x, %d run the library variant's own route "
                  "(the same kernels timed twice), min of the rest %s" % (
                      "default" if k == "def" else "tuned", len(v), sum(x >= 1.0 for x in v),
                      sum(x >= 0.98 for x in v), 100.0 * sum(x >= 0.98 for x in v) / len(v),
                      sum(x < 0.9 for x in v), min(v), len(below), sum(sm for _, sm in below),
                      "%.2fx" % min(x for x, sm in below if not sm) if any(not sm for _, sm in below) else "-"))
    if mem:
        print("memory-bound (below the ridge): %d cases, >= 85%% of copy on %d; %s" % (
            len(mem), sum(m[2] >= 0.85 for m in mem), ", ".join("%s.%s %.0f%%" % (a, b, 100 * x) for a, b, x, _ in mem)))
        print("memory-bound against a copy of the same bytes (torch, the same run): >= 85%% on %d of %d; %s" % (
            sum(m[3] >= 0.85 for m in mem), len(mem), ", ".join("%s.%s %.0f%%" % (a, b, 100 * y) for a, b, _, y in mem)))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "gen":
        gen(a[1], a[2], a[3] if len(a) > 3 else None)
    elif len(a) >= 4 and a[0] == "extract":
        extract(a[1], a[2], a[3:])
    elif len(a) >= 4 and a[0] == "all":
        all_graph(a[1], a[2], a[3:])
    elif len(a) >= 3 and a[0] == "torch":
        torch_run(a[1], a[2], a[3] if len(a) > 3 else None)
    elif len(a) == 4 and a[0] == "table":
        table(a[1], a[2], a[3])
    else:
        sys.exit(__doc__)
