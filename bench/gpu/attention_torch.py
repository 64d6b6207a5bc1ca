#!/usr/bin/env python3
"""The PyTorch side of bench/gpu/attention.sh, in one process:

    attention_torch.py OUT_DIR CASE...

CASE is NAME:B:H:TQ:TK:D:CAUSAL (CAUSAL 0 or 1).  For each case it makes q,
k, v ($ATT_DTYPE: f16 (default), bf16 or f32; [B, H, T, D], normal, seed 0) on
the GPU, writes them (bf16 as 2-byte voids, '|V2', what kfuse reads) to
OUT_DIR/NAME.q.npy, .k.npy, .v.npy with the reference output NAME.ref.npy
(scaled_dot_product_attention, flash backend where it runs, else the
memory-efficient one; scale 1/sqrt(D); causal aligned bottom-right for a
decode), then times scaled_dot_product_attention with each backend that
runs (flash, cuDNN, memory-efficient) and torch.compile of the attention
written as matmuls and softmax (Inductor may match it to SDPA), at the
sequence lengths in $COMPILE_T only and without a mask (each shape
compiles for tens of seconds).  One JSON object
per line: {"name", "variant", "ms"} (ms NaN and "why" when it did not run).
$ATT_TF32=1: f32 timed with torch.backends' allow_tf32 on (matmuls and
cuDNN); the references are computed with it off.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from timing import do_bench  # bench/gpu/timing.py, beside this script

dev = "cuda"
dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[os.environ.get("ATT_DTYPE", "f16")]
tf32 = os.environ.get("ATT_TF32", "0") == "1"


def allow_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def to_npy(t):
    """t as numpy: bf16's bits as 2-byte voids (numpy has no bf16)."""
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).cpu().numpy().view("V2")
    return t.cpu().numpy()


def emit(name, variant, ms, **kw):
    print(json.dumps(dict(name=name, variant=variant, ms=ms, **kw)), flush=True)


def backends():
    """(variant, context manager factory) for each SDPA backend this torch has."""
    out = []
    try:  # torch >= 2.3
        from torch.nn.attention import SDPBackend, sdpa_kernel
        names = [("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION")]
        for v, b in names:
            if hasattr(SDPBackend, b):
                out.append((v, lambda b=b: sdpa_kernel(getattr(SDPBackend, b))))
    except ImportError:  # torch 2.0 - 2.2
        flags = {"flash": dict(enable_flash=True, enable_math=False, enable_mem_efficient=False),
                 "efficient": dict(enable_flash=False, enable_math=False, enable_mem_efficient=True)}
        for v, kw in flags.items():
            out.append((v, lambda kw=kw: torch.backends.cuda.sdp_kernel(**kw)))
    return out


def manual(q, k, v, causal):
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if causal:
        tq, tk = s.shape[-2], s.shape[-1]
        i = torch.arange(tq, device=q.device)[:, None] + (tk - tq)
        j = torch.arange(tk, device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ v


def sdpa(q, k, v, causal):
    if causal and q.shape[-2] != k.shape[-2]:
        # bottom-right alignment (a cache): an explicit mask
        tq, tk = q.shape[-2], k.shape[-2]
        i = torch.arange(tq, device=q.device)[:, None] + (tk - tq)
        j = torch.arange(tk, device=q.device)[None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=j <= i)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def main(out, cases):
    bks = backends()
    # one compilation per shape: allow them all (the default limit of 8
    # would fall back to eager silently), at the lengths in $COMPILE_T
    torch._dynamo.config.cache_size_limit = 64
    compile_t = {int(t) for t in os.environ.get("COMPILE_T", "2048").split()}
    compiled = torch.compile(manual)
    for c in cases:
        name, B, H, TQ, TK, D, causal = c.split(":")
        B, H, TQ, TK, D, causal = int(B), int(H), int(TQ), int(TK), int(D), causal == "1"
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn(B, H, TQ, D, device=dev, dtype=dtype, generator=g)
        k = torch.randn(B, H, TK, D, device=dev, dtype=dtype, generator=g)
        v = torch.randn(B, H, TK, D, device=dev, dtype=dtype, generator=g)
        ref = None
        allow_tf32(False)
        for want in ("flash", "efficient", "cudnn"):
            for v_, ctx in bks:
                if v_ != want or ref is not None:
                    continue
                try:
                    with ctx():
                        ref = sdpa(q, k, v, causal)
                    torch.cuda.synchronize()
                except Exception:  # not this backend at this shape
                    ref = None
        if ref is None:
            ref = sdpa(q, k, v, causal)
        for t, n in ((q, "q"), (k, "k"), (v, "v"), (ref, "ref")):
            np.save(f"{out}/{name}.{n}.npy", to_npy(t))
        allow_tf32(tf32)
        for v_, ctx in bks:
            try:
                with ctx():
                    fn = lambda: sdpa(q, k, v, causal)
                    fn()
                    torch.cuda.synchronize()
                    emit(name, v_, do_bench(fn, return_mode="median"))
            except Exception as e:  # a backend that does not take the shape
                emit(name, v_, math.nan, why=str(e).splitlines()[0][:120] if str(e) else type(e).__name__)
        if TQ not in compile_t or causal:
            emit(name, "compile", math.nan, why="not compiled at this shape ($COMPILE_T, not causal)")
            del q, k, v, ref
            torch.cuda.empty_cache()
            continue
        try:
            fn = lambda: compiled(q, k, v, causal)
            fn()
            torch.cuda.synchronize()
            emit(name, "compile", do_bench(fn, return_mode="median"))
        except Exception as e:
            emit(name, "compile", math.nan, why=(str(e).splitlines() or [type(e).__name__])[0][:120])
            torch.cuda.empty_cache()
        del q, k, v, ref
        torch.cuda.empty_cache()
    # the device copy, the decode's bandwidth ceiling
    n = 1 << 28
    a = torch.empty(n, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    ms = do_bench(lambda: b.copy_(a), return_mode="median")
    emit("copy", "copy", ms, gbs=2 * 4 * n / (ms * 1e6))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
