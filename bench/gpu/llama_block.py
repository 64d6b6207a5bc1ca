#!/usr/bin/env python3
"""A Llama-style decoder block (RMSNorm, rotary embeddings, grouped-query
attention with a causal mask, SwiGLU), random weights, static shapes: the
fp32 block at 64 tokens x 512 of issue 19 (8 heads of 64, 4 k/v heads, an
FFN of 1376).

    llama_block.py export DIR     # DIR/llama_block.onnx, DIR/x.npy, DIR/ref.npy
                                  # (PyTorch's output on the CPU, f32)
    llama_block.py time [N]       # on the GPU: eager, torch.compile(mode=
                                  # "reduce-overhead"), without and with TF32;
                                  # one JSON object per line (median ms)

Runs with /usr/bin/python3 here (torch 1.13, CPU: export) and with the
GPU machine's PyTorch (time).  bench/gpu/llama_block.sh runs both and kfuse.
"""
import inspect
import json
import math
import sys

import numpy as np
import torch
from torch import nn

T, D, H, HKV, F = 64, 512, 8, 4, 1376
HD = D // H


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d) * 0.1 + 1.0)
        self.eps = eps

    def forward(self, x):
        return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.q = nn.Linear(D, H * HD, bias=False)
        self.k = nn.Linear(D, HKV * HD, bias=False)
        self.v = nn.Linear(D, HKV * HD, bias=False)
        self.o = nn.Linear(H * HD, D, bias=False)
        self.gate = nn.Linear(D, F, bias=False)
        self.up = nn.Linear(D, F, bias=False)
        self.down = nn.Linear(F, D, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        ang = torch.outer(torch.arange(T).float(), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos()[None, None])
        self.register_buffer("sin", emb.sin()[None, None])
        self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1)[None, None])

    def forward(self, x):
        b = x.shape[0]
        h = self.n1(x)
        q = self.q(h).view(b, T, H, HD).transpose(1, 2)
        k = self.k(h).view(b, T, HKV, HD).transpose(1, 2)
        v = self.v(h).view(b, T, HKV, HD).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        k = k[:, :, None].expand(b, HKV, H // HKV, T, HD).reshape(b, H, T, HD)
        v = v[:, :, None].expand(b, HKV, H // HKV, T, HD).reshape(b, H, T, HD)
        s = q @ k.transpose(-1, -2) / math.sqrt(HD) + self.mask
        a = torch.softmax(s, dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, T, D))
        h = self.n2(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


def model():
    torch.manual_seed(0)
    return Block().eval()


def export(d):
    m = model()
    x = torch.randn(1, T, D)
    with torch.no_grad():
        ref = m(x)
    kw = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False  # the TorchScript exporter, as torch 1.13's (2.9 made dynamo the default)
    torch.onnx.export(m, (x,), f"{d}/llama_block.onnx", input_names=["x"], output_names=["y"], opset_version=17, **kw)
    np.save(f"{d}/x.npy", x.numpy())
    np.save(f"{d}/ref.npy", ref.numpy())


def time(n):
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from timing import do_bench  # bench/gpu/timing.py
    m = model().cuda()
    x = torch.randn(1, T, D, device="cuda")
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        with torch.no_grad():
            runs = [("eager", m), ("compile-reduce-overhead", torch.compile(m, mode="reduce-overhead"))]
            for name, f in runs:
                try:
                    for _ in range(3):
                        f(x)
                    ms = do_bench(lambda: f(x), return_mode="median")
                except Exception as e:  # no Triton, no compiler: say so and go on
                    print(f"llama_block {name} tf32={tf32} failed: {e}", file=sys.stderr)
                    ms = math.nan
                print(json.dumps(dict(name="llama_block", variant=name, tf32=tf32, ms=ms)), flush=True)
        torch._dynamo.reset()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "time":
        time(int(sys.argv[2]) if len(sys.argv) > 2 else 100)
    else:
        sys.exit(__doc__)
