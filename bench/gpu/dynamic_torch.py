#!/usr/bin/env python3
"""dynamic_torch.py: one kfuse compile of BERT-base and GPT-2 small exported
with dynamic batch and sequence, swept over shapes beside PyTorch (eager and
torch.compile(dynamic=True)) and kfuse compiled for each shape alone, in one
process (bench/gpu/dynamic.sh runs it; docs/dynamic.md).

    dynamic_torch.py --lib LIBKFUSE --out DIR [--models bert,gpt2] [--shapes 1x7,4x256,...]
                     [--static SHAPES|all|none] [--n N] [--dtype f16|f32] [--pipeline P]
                     [--device cuda|cpu] [--small]

For each model: the model is built with seeded random weights as
bench/models/zoo.py writes it (position tables of 2048), exported to ONNX
with dynamic axes (batch, seq), loaded by kfuse (libkfuse.so through ctypes:
the embedding API), optimised with the pipeline and compiled ONCE for cuda.
Then for each shape, with the same device tensors for everyone:

  first     host ms of kfuse's first run of the shape (a miss: specialise,
            plan, compile what the kernel cache lacks)
  new       kernels compiled for the shape: entries the kernel cache gained
  kfuse     median device ms of kfuse_run_device (a hit: the shape's CUDA graph)
  static    the same model compiled for that shape alone (specialize, then the
            pipeline; a context of its own), median ms
  tc_first  host ms of torch.compile(dynamic=True)'s first call of the shape
  tc        its median ms; eager: PyTorch eager's
  err       relative L2 of each kfuse output against eager PyTorch's (the
            worst output); every row must say ok (f16: 2e-2, f32: 1e-3;
            torch.compile's own error beside it)

One table at the end (and DIR/dynamic.json).  --device cpu --small tries
the plumbing without a GPU: the zoo's small configurations, kfuse's cpu
backend through kfuse_run, no torch.compile where torch lacks it.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import zoo  # noqa: E402

DT = {"f16": 0, "bf16": 1, "f32": 2, "f64": 3, "i1": 4, "i8": 5, "i32": 6, "i64": 7}
TORCH_DT = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.int64: 7}


class Buf(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("nbytes", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("dim", ctypes.c_int64 * 8)]


class Opts(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("cache_dir", ctypes.c_char_p), ("allow_tf32", ctypes.c_int)]


class Kfuse:
    """The embedding API (include/kfuse/kfuse.h) through ctypes."""

    def __init__(self, path):
        L = ctypes.CDLL(path)
        vp = ctypes.c_void_p
        for name, res, args in [
                ("kfuse_new", vp, []), ("kfuse_free", None, [vp]), ("kfuse_error", ctypes.c_char_p, [vp]),
                ("kfuse_load", vp, [vp, ctypes.c_char_p]), ("kfuse_model_free", None, [vp]),
                ("kfuse_pipeline", ctypes.c_int, [vp, ctypes.c_char_p]),
                ("kfuse_compile", vp, [vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Opts)]),
                ("kfuse_compiled_free", None, [vp]), ("kfuse_set_max_plans", ctypes.c_int, [vp, ctypes.c_int]),
                ("kfuse_run", ctypes.c_int, [vp, ctypes.POINTER(Buf), ctypes.c_int, ctypes.POINTER(Buf), ctypes.c_int]),
                ("kfuse_run_device", ctypes.c_int,
                 [vp, ctypes.POINTER(Buf), ctypes.c_int, ctypes.POINTER(Buf), ctypes.c_int, vp])]:
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        self.L = L

    def err(self, k):
        return self.L.kfuse_error(k).decode(errors="replace")

    def compile(self, onnx, pipeline, backend, cache_dir):
        """A context, model and compiled graph; raises with kfuse's errors."""
        L = self.L
        k = L.kfuse_new()
        m = L.kfuse_load(k, onnx.encode())
        if not m or L.kfuse_pipeline(m, pipeline.encode()) != 0:
            raise RuntimeError(self.err(k))
        o = Opts(0, cache_dir.encode(), 0)
        x = L.kfuse_compile(m, None, backend.encode(), ctypes.byref(o))
        if not x:
            raise RuntimeError(self.err(k))
        return k, m, x

    def free(self, kmx):
        k, m, x = kmx
        self.L.kfuse_compiled_free(x)
        self.L.kfuse_model_free(m)
        self.L.kfuse_free(k)


def bufs(ts, host):
    a = (Buf * len(ts))()
    for i, t in enumerate(ts):
        a[i].data = t.data_ptr()
        a[i].nbytes = t.numel() * t.element_size()
        a[i].dtype = TORCH_DT[t.dtype]
        a[i].rank = t.dim()
        for d in range(t.dim()):
            a[i].dim[d] = t.shape[d]
    return a


def run_kfuse(kf, kmx, ins, outs, host):
    """One run into outs (device tensors and the current stream, or host)."""
    x = kmx[2]
    ib, ob = bufs(ins, host), bufs(outs, host)
    if host:
        rc = kf.L.kfuse_run(x, ib, len(ins), ob, len(outs))
    else:
        rc = kf.L.kfuse_run_device(x, ib, len(ins), ob, len(outs),
                                   ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    if rc != 0:
        raise RuntimeError(kf.err(kmx[0]))


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def timed(fn, n, dev):
    """Median ms of n calls after two warm-up calls (CUDA events per call on
    the GPU; host time on the CPU)."""
    fn()
    fn()
    sync(dev)
    if dev != "cuda":
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def host_ms(fn, dev):
    sync(dev)
    t0 = time.perf_counter()
    r = fn()
    sync(dev)
    return (time.perf_counter() - t0) * 1e3, r


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def outs_of(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def build(kind, cfg, dtype, dev, out):
    """The model (eval, on dev, in dtype) and its ONNX export with dynamic axes."""
    c = zoo.HFConfig(**dict(zoo.HF_CFG[kind][1 if cfg.small else 0], max_pos=64 if cfg.small else 2048))
    torch.manual_seed(0)
    model = {"bert": zoo.Bert, "gpt2": zoo.GPT2}[kind](c).eval().to(dev, dtype)
    ins = make_inputs(kind, c, 2, 8, dev, torch.Generator().manual_seed(1))
    names = ["input_ids", "attention_mask"] if kind == "bert" else ["input_ids"]
    outn = ["last_hidden_state", "pooler_output"] if kind == "bert" else ["last_hidden_state"]
    dyn = {n: {0: "batch", 1: "seq"} for n in names}
    dyn["last_hidden_state"] = {0: "batch", 1: "seq"}
    if kind == "bert":
        dyn["pooler_output"] = {0: "batch"}
    path = os.path.join(out, f"{kind}_dyn_{'small' if cfg.small else 'full'}_{cfg.dtype}.onnx")
    if not os.path.exists(path):
        zoo.export(model, ins, names, outn, path, dyn)
    return model, c, path


def make_inputs(kind, c, b, t, dev, g):
    ids = torch.randint(1, c.vocab, (b, t), generator=g).to(dev)
    if kind != "bert":
        return [ids]
    m = torch.ones(b, t, dtype=torch.long)
    m[-1, t - t // 4:] = 0  # the last sequence is padded: the mask matters
    return [ids, m.to(dev)]


def out_like(ref):
    return [torch.empty_like(r) for r in ref]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="bert,gpt2")
    ap.add_argument("--shapes", default="2x77,4x256,3x200,8x384,6x300,16x512,13x450,32x200,64x128,48x100,"
                    "8x1024,4x2048,3x1500,2x2048,1x128,1x2048,1x7,1x1")
    ap.add_argument("--static", default="1x128,4x256,16x512,64x128,8x1024,4x2048",
                    help="shapes also compiled alone (all, none, or a list)")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--dtype", default="f16", choices=["f16", "f32"])
    ap.add_argument("--pipeline", default="canonicalize,cse,rules,canonicalize,cse,merge-matmul,fuse-attention,fuse-matmul,"
                    "fuse,dce")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="the zoo's small configurations (plumbing)")
    ap.add_argument("--max-seconds", type=float, default=440, help="stop starting new shapes after this")
    cfg = ap.parse_args()
    t_start = time.time()
    dev = cfg.device
    host = dev != "cuda"
    dtype = torch.float16 if cfg.dtype == "f16" else torch.float32
    tol = 2e-2 if cfg.dtype == "f16" else 1e-3
    kf = Kfuse(cfg.lib)
    shapes = [tuple(int(v) for v in s.split("x")) for s in cfg.shapes.split(",") if s]
    static = set(shapes) if cfg.static == "all" else set() if cfg.static == "none" else \
        {tuple(int(v) for v in s.split("x")) for s in cfg.static.split(",") if s}
    have_compile = hasattr(torch, "compile") and dev == "cuda"
    os.makedirs(cfg.out, exist_ok=True)  # the exports and caches go there
    rows, bad = [], 0
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}, {cfg.dtype}, "
          f"pipeline {cfg.pipeline}", flush=True)
    hdr = (f"{'model':6} {'B':>3} {'T':>5} {'first':>9} {'new':>4} {'kfuse':>8} {'static':>8} {'dyn/st':>6} "
           f"{'tc_first':>9} {'tc':>8} {'eager':>8} {'kf/tc':>6} {'err':>8} {'tc_err':>8}")
    for kind in [m for m in cfg.models.split(",") if m]:
        model, c, onnx = build(kind, cfg, dtype, dev, cfg.out)
        dcache = os.path.join(cfg.out, f"cache-{kind}-dyn")
        scache = os.path.join(cfg.out, f"cache-{kind}-static")
        os.makedirs(dcache, exist_ok=True)
        os.makedirs(scache, exist_ok=True)
        count = lambda: len([f for f in os.listdir(dcache) if f.endswith(".kc")])  # noqa: E731
        backend = "cpu" if host else "cuda"
        t0 = time.perf_counter()
        dyn = kf.compile(onnx, cfg.pipeline, backend, dcache)
        kf.L.kfuse_set_max_plans(dyn[2], 64)
        print(f"== {kind}: loaded, optimised and compiled once in {(time.perf_counter() - t0):.1f} s", flush=True)
        print(hdr, flush=True)
        tc = torch.compile(model, dynamic=True) if have_compile else None
        for (b, t) in shapes:
            if time.time() - t_start > cfg.max_seconds:
                print(f"{kind} {b}x{t}: skipped, past --max-seconds", flush=True)
                continue
            g = torch.Generator().manual_seed(b * 10007 + t)
            ins = make_inputs(kind, c, b, t, dev, g)
            row = {"model": kind, "B": b, "T": t}
            try:
                with torch.no_grad():
                    ref = outs_of(model(*ins))
                    outs = out_like(ref)
                    n0 = count()
                    row["first"], _ = host_ms(lambda: run_kfuse(kf, dyn, ins, outs, host), dev)
                    row["new"] = count() - n0
                    row["err"] = max(rel_l2(o, r) for o, r in zip(outs, ref))
                    row["kfuse"] = timed(lambda: run_kfuse(kf, dyn, ins, outs, host), cfg.n, dev)
                    if (b, t) in static:
                        st = kf.compile(onnx, f"specialize{{batch={b},seq={t}}},{cfg.pipeline}", backend, scache)
                        so = out_like(ref)
                        run_kfuse(kf, st, ins, so, host)
                        row["static_err"] = max(rel_l2(o, r) for o, r in zip(so, ref))
                        row["static"] = timed(lambda: run_kfuse(kf, st, ins, so, host), cfg.n, dev)
                        kf.free(st)
                    if tc is not None:
                        row["tc_first"], tr = host_ms(lambda: tc(*ins), dev)
                        row["tc_err"] = max(rel_l2(o, r) for o, r in zip(outs_of(tr), ref))
                        row["tc"] = timed(lambda: tc(*ins), cfg.n, dev)
                    row["eager"] = timed(lambda: model(*ins), cfg.n, dev)
                row["ok"] = row["err"] <= tol and row.get("static_err", 0) <= tol
            except Exception as e:  # noqa: BLE001 -- a failing shape is a row saying why; the rest go on
                row["ok"] = False
                row["why"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            bad += not row["ok"]
            rows.append(row)
            print(fmt(row), flush=True)
            if dev == "cuda":
                torch.cuda.empty_cache()
        row = {"model": kind, "kernels": count()}
        print(f"== {kind}: {row['kernels']} kernels in the kernel cache after {len(shapes)} shapes", flush=True)
        rows.append(row)
        kf.free(dyn)
        del model, tc
        if dev == "cuda":
            torch.cuda.empty_cache()
    print("\n" + hdr)
    for r in rows:
        if "B" in r:
            print(fmt(r))
        else:
            print(f"{r['model']}: {r['kernels']} kernels compiled in all (the cache's entries)")
    with open(os.path.join(cfg.out, "dynamic.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("every shape matches PyTorch" if not bad else f"{bad} SHAPES FAILED OR DIFFER FROM PYTORCH")
    return 1 if bad else 0


def fmt(r):
    if "why" in r:
        return f"{r['model']:6} {r['B']:>3} {r['T']:>5} FAILED: {r['why']}"
    f = lambda k, w, p=3: f"{r[k]:>{w}.{p}f}" if k in r else f"{'-':>{w}}"  # noqa: E731
    ratio = lambda a, b: f"{r[a] / r[b]:>6.2f}" if a in r and b in r and r[b] > 0 else f"{'-':>6}"  # noqa: E731
    return (f"{r['model']:6} {r['B']:>3} {r['T']:>5} {f('first', 9, 1)} {r['new']:>4} {f('kfuse', 8)} "
            f"{f('static', 8)} {ratio('kfuse', 'static')} {f('tc_first', 9, 1)} {f('tc', 8)} {f('eager', 8)} "
            f"{ratio('kfuse', 'tc')} {r['err']:>8.1e} {f('tc_err', 8, 4)} {'ok' if r['ok'] else 'MISMATCH'}")


if __name__ == "__main__":
    sys.exit(main())
