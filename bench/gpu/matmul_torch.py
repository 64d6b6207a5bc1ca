#!/usr/bin/env python3
"""The baselines of bench/gpu/matmul.sh in PyTorch, median times from
triton.testing.do_bench (CUDA events).  One JSON object per line:
  {"name": ..., "variant": "cublas" | "eager" | "compile" | "max-autotune", "ms": ...}
  {"name": "copy", "variant": "copy", "ms": ..., "gbs": ...}
cublas: torch.matmul alone (cuBLAS); eager: matmul, then add and gelu as
torch runs them; compile: torch.compile of the same function (cuBLAS and a
fused Triton epilogue, or its own matmul template); max-autotune only when
$MATMUL_MAX_AUTOTUNE=1 (it compiles for minutes).  copy: a 1 GiB device
copy, the bandwidth ceiling of the GEMV bar."""
import json
import math
import os
import sys

import torch

from timing import do_bench  # bench/gpu/timing.py, beside this script

dev = "cuda"
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False


def mm_bias_gelu(x, w, b):
    return torch.nn.functional.gelu(x @ w + b, approximate="tanh")


def gemv_kn(x, w):
    return x @ w


def gemv_nk(x, w):
    return x @ w.t()


# name: (function, shapes, dtype); the shapes of the .kf graphs matmul.sh writes
CASES = {
    "mm_bias_gelu_4096": (mm_bias_gelu, [(4096, 4096), (4096, 4096), (4096,)], torch.float16),
    "mm_bias_gelu_512": (mm_bias_gelu, [(512, 4096), (4096, 4096), (4096,)], torch.float16),
    "gemv_kn": (gemv_kn, [(1, 4096), (4096, 1024)], torch.float32),
    "gemv_nk": (gemv_nk, [(1, 4096), (1024, 4096)], torch.float32),
    "gemv_kn_k1024": (gemv_kn, [(1, 1024), (1024, 4096)], torch.float32),
    "gemv_nk_k1024": (gemv_nk, [(1, 1024), (4096, 1024)], torch.float32),
}


def emit(name, variant, ms, **kw):
    print(json.dumps(dict(name=name, variant=variant, ms=ms, **kw)), flush=True)


def timed(name, variant, fn):
    try:
        fn()
        emit(name, variant, do_bench(fn, return_mode="median"))
    except Exception as e:  # no compiler toolchain, out of memory: report and go on
        print(f"{name} {variant} failed: {e}", file=sys.stderr)
        emit(name, variant, math.nan)


def main():
    names = sys.argv[1:] or list(CASES)
    for name in names:
        fn, shapes, dt = CASES[name]
        args = [torch.randn(*s, device=dev, dtype=dt) for s in shapes]
        if fn is mm_bias_gelu:
            timed(name, "cublas", lambda: args[0] @ args[1])
        timed(name, "eager", lambda: fn(*args))
        cfn = torch.compile(fn)
        timed(name, "compile", lambda: cfn(*args))
        if os.environ.get("MATMUL_MAX_AUTOTUNE") == "1":
            afn = torch.compile(fn, mode="max-autotune-no-cudagraphs")
            timed(name, "max-autotune", lambda: afn(*args))
        torch._dynamo.reset()
    n = 1 << 28
    a = torch.empty(n, device=dev, dtype=torch.float32)
    b = torch.empty_like(a)
    ms = do_bench(lambda: b.copy_(a), return_mode="median")
    emit("copy", "copy", ms, gbs=2 * n * 4 / ms / 1e6)


if __name__ == "__main__":
    main()
