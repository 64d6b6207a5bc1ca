#!/usr/bin/env python3
"""The GPU benchmarks of bench/gpu/*.kf in PyTorch: eager and torch.compile,
median time from triton.testing.do_bench (CUDA events), plus a device copy
for the bandwidth ceiling (only that with --copy).  Prints one JSON object
per line:
  {"name": ..., "bytes": ..., "eager_ms": ..., "compile_ms": ...}
  {"name": "copy", "bytes": ..., "ms": ..., "gbs": ...}
bytes counts each input and output once (the traffic a fused kernel needs)."""
import json
import math
import sys

import torch

from timing import do_bench  # bench/gpu/timing.py, beside this script

dev = "cuda"
torch.manual_seed(0)


def ew_chain(x):
    c = torch.relu(x * 1.5 + -0.25)
    return c * c - x


def ew_chain3(x, y, z):
    c = torch.relu(x * y + z)
    return c * c - x


def bias_gelu(x, b):
    return torch.nn.functional.gelu(x + b, approximate="tanh")


def layer_norm(x, g, be):
    mu = x.mean(dim=-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(dim=-1, keepdim=True)
    return d * torch.rsqrt(var + 1e-5) * g + be


def softmax(x):
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


CASES = {
    "ew_chain": (ew_chain, [(16777216,)]),
    "ew_chain3": (ew_chain3, [(16777216,)] * 3),
    "bias_gelu": (bias_gelu, [(8192, 4096), (4096,)]),
    "layer_norm": (layer_norm, [(16384, 1024), (1024,), (1024,)]),
    "softmax": (softmax, [(16384, 1024)]),
}


DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def main():
    # --copy: only the copy ceiling (bench/gpu/sweep.sh); NAME.f16 / NAME.bf16:
    # the same case in that dtype (the name of bench/gpu/run.sh's variant)
    names = [a for a in sys.argv[1:] if a != "--copy"] or ([] if "--copy" in sys.argv else list(CASES))
    for name in names:
        base, _, dt = name.partition(".")
        fn, shapes = CASES[base]
        # NAME.f16x2: the first input's leading dim times 2 (bench/gpu/run.sh)
        dt, _, k = dt.partition("x")
        if k:
            shapes = [(shapes[0][0] * int(k),) + tuple(shapes[0][1:])] + shapes[1:]
        args = [torch.randn(*s, device=dev, dtype=DTYPES[dt or "f32"]) for s in shapes]
        out = fn(*args)
        nbytes = sum(a.numel() * a.element_size() for a in args) + out.numel() * out.element_size()
        eager = do_bench(lambda: fn(*args), return_mode="median")
        try:
            cfn = torch.compile(fn)
            cfn(*args)
            comp = do_bench(lambda: cfn(*args), return_mode="median")
        except Exception as e:  # no compiler toolchain: report and go on
            print(f"torch.compile failed for {name}: {e}", file=sys.stderr)
            comp = math.nan
        print(json.dumps({"name": name, "bytes": nbytes, "eager_ms": eager, "compile_ms": comp}), flush=True)
    # the ceiling: a device-to-device copy of 1 GiB (read + write counted);
    # and the same copy at the benchmarks' own size, 16M f32 (134 MB moved)
    # (copy67, copy268: the bytes of the .f16 and .f16x4 rows)
    for name, n in (("copy", 1 << 28), ("copy134", 1 << 24), ("copy67", 1 << 23), ("copy268", 1 << 25)):
        a = torch.randn(n, device=dev, dtype=torch.float32)
        b = torch.empty_like(a)
        ms = do_bench(lambda: b.copy_(a), return_mode="median")
        nb = 2 * n * 4
        print(json.dumps({"name": name, "bytes": nb, "ms": ms, "gbs": nb / ms / 1e6}), flush=True)


main()
