#!/usr/bin/python3
"""Writes the attention test models: small transformer blocks as PyTorch
(1.13, CPU) exports them with torch.onnx.export, random weights, each with
its input and PyTorch's output:

    /usr/bin/python3 tests/attention/gen.py [OUT_DIR]   (default: beside this file)

gives OUT_DIR/NAME.onnx, NAME.in<i>.npy (inputs in order) and NAME.out.npy.
tests/attention/run.sh imports each, runs the standard pipeline with
fuse-attention and checks that every attention became one kernel and that
the interpreter matches PyTorch.  The models are the spellings real code
uses: a GPT-2 block (a causal tril buffer through where with finfo.min),
BERT (an additive padding mask from an input), a Llama decoder layer (RMS
norm, rotary embeddings, grouped-query attention by expand and reshape, an
additive causal mask, SwiGLU), nn.MultiheadAttention, and variants written
here to differ from those (masked_fill with triu and -inf, a scale on q,
the matmul written with k pre-transposed, cross attention over a cache with
a bottom-right causal mask, soft-capping, a boolean key-padding mask as an
input).  Deterministic: fixed seeds."""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, D, H = 2, 16, 64, 4
HD = D // H


class GPT2Block(nn.Module):
    """HF GPT-2's block: the causal mask is a tril buffer, sliced, applied
    with torch.where and finfo.min; scores divided by sqrt(d)."""

    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("bias", torch.tril(torch.ones(32, 32, dtype=torch.bool)).view(1, 1, 32, 32))

    def attn(self, x):
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(B, T, H, HD).transpose(1, 2) for t in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HD)
        w = torch.where(self.bias[:, :, :T, :T], w, torch.tensor(torch.finfo(w.dtype).min))
        w = F.softmax(w, dim=-1)
        return self.c_proj((w @ v).transpose(1, 2).reshape(B, T, D))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class BertLayer(nn.Module):
    """HF BERT's layer: an additive mask (1 - m) * -10000 from an input
    [B, T] of ones and zeros, post-LN."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.i, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x, mask):
        ext = (1.0 - mask[:, None, None, :]) * -10000.0
        q, k, v = (f(x).view(B, T, H, HD).permute(0, 2, 1, 3) for f in (self.q, self.k, self.v))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HD) + ext
        c = torch.matmul(s.softmax(-1), v).permute(0, 2, 1, 3).reshape(B, T, D)
        x = self.ln1(x + self.o(c))
        return self.ln2(x + self.out(F.gelu(self.i(x))))


class LlamaLayer(nn.Module):
    """A Llama decoder layer: RMS norm, rotary embeddings (rotate_half),
    4 query heads over 2 k/v heads repeated by expand and reshape
    (repeat_kv), an additive causal mask of finfo.min, SwiGLU."""

    KV = 2

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, D, bias=False)
        self.k, self.v = nn.Linear(D, self.KV * HD, bias=False), nn.Linear(D, self.KV * HD, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.gate, self.up = nn.Linear(D, 2 * D, bias=False), nn.Linear(D, 2 * D, bias=False)
        self.down = nn.Linear(2 * D, D, bias=False)
        self.w1, self.w2 = nn.Parameter(torch.rand(D) + 0.5), nn.Parameter(torch.rand(D) + 0.5)
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        f = torch.outer(torch.arange(T).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos()[None, None])
        self.register_buffer("sin", emb.sin()[None, None])
        m = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)
        self.register_buffer("mask", m[None, None])

    @staticmethod
    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    @staticmethod
    def rot(x):
        return torch.cat((-x[..., HD // 2:], x[..., :HD // 2]), dim=-1)

    def forward(self, x):
        h = self.rms(x, self.w1)
        q = self.q(h).view(B, T, H, HD).transpose(1, 2)
        k = self.k(h).view(B, T, self.KV, HD).transpose(1, 2)
        v = self.v(h).view(B, T, self.KV, HD).transpose(1, 2)
        q = q * self.cos + self.rot(q) * self.sin
        k = k * self.cos + self.rot(k) * self.sin
        rep = H // self.KV
        k = k[:, :, None].expand(B, self.KV, rep, T, HD).reshape(B, H, T, HD)
        v = v[:, :, None].expand(B, self.KV, rep, T, HD).reshape(B, H, T, HD)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HD) + self.mask
        p = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        a = torch.matmul(p, v).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(a)
        h = self.rms(x, self.w2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.MultiheadAttention(D, H, batch_first=True)

    def forward(self, x):
        return self.m(x, x, x, need_weights=False)[0]


class TriuFill(nn.Module):
    """masked_fill(triu(ones, 1), -inf), the scale on q, head dims by permute."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)

    def forward(self, x):
        q, k, v = self.qkv(x).split(D, dim=-1)
        q = q.reshape(B, T, H, HD).permute(0, 2, 1, 3) * HD ** -0.5
        k = k.reshape(B, T, H, HD).permute(0, 2, 3, 1)
        v = v.reshape(B, T, H, HD).permute(0, 2, 1, 3)
        s = (q @ k).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        return (s.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(B, T, D)


class CrossCache(nn.Module):
    """Four new queries over 20 cached keys and values (inputs), a causal
    mask aligned bottom-right (query i sees keys up to 16 + i) built from
    ranges, the scale as a multiplication."""

    TQ, TK = 4, 20

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, D)

    def forward(self, x, k, v):
        q = self.q(x).view(B, self.TQ, H, HD).transpose(1, 2)
        i = torch.arange(self.TQ)[:, None] + (self.TK - self.TQ)
        j = torch.arange(self.TK)[None, :]
        s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(HD))
        s = s.masked_fill(j > i, torch.finfo(torch.float32).min)
        return torch.matmul(torch.softmax(s, -1), v)


class SoftCap(nn.Module):
    """Gemma-style soft-capping of the scores, a boolean key-padding mask
    input (true = a real token) through where, k given already transposed."""

    def forward(self, q, kt, v, keep):
        s = torch.matmul(q, kt) * HD ** -0.5
        s = torch.tanh(s / 20.0) * 20.0
        s = torch.where(keep[:, None, None, :], s, torch.tensor(float("-inf")))
        return torch.matmul(F.softmax(s, dim=-1), v)


def models():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, D, generator=g)
    mask = torch.ones(B, T)
    mask[1, 11:] = 0
    keep = torch.ones(B, T, dtype=torch.bool)
    keep[0, 13:] = False
    qh = torch.randn(B, H, T, HD, generator=g)
    kt = torch.randn(B, H, HD, T, generator=g)
    vh = torch.randn(B, H, T, HD, generator=g)
    xc = torch.randn(B, CrossCache.TQ, D, generator=g)
    kc = torch.randn(B, H, CrossCache.TK, HD, generator=g)
    vc = torch.randn(B, H, CrossCache.TK, HD, generator=g)
    return [
        ("gpt2", GPT2Block(), (x,), 1),
        ("bert", BertLayer(), (x, mask), 1),
        ("llama", LlamaLayer(), (x,), 1),
        ("mha", MHA(), (x,), 1),
        ("triu_fill", TriuFill(), (x,), 1),
        ("cross_cache", CrossCache(), (xc, kc, vc), 1),
        ("softcap", SoftCap(), (qh, kt, vh, keep), 1),
    ]


def main(out):
    os.makedirs(out, exist_ok=True)
    for i, (name, m, args, _) in enumerate(models()):
        torch.manual_seed(100 + i)
        for p in m.parameters():
            with torch.no_grad():
                p.copy_(torch.randn_like(p) * (0.5 / math.sqrt(p.shape[-1])) + (1.0 if p.dim() == 1 and
                        name == "llama" else 0.0))
        m.eval()
        with torch.no_grad():
            y = m(*args)
        names = ["in%d" % j for j in range(len(args))]
        torch.onnx.export(m, args, os.path.join(out, name + ".onnx"), opset_version=17,
                          input_names=names, output_names=["y"])
        for j, a in enumerate(args):
            np.save(os.path.join(out, "%s.in%d.npy" % (name, j)), a.numpy())
        np.save(os.path.join(out, name + ".out.npy"), y.numpy())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
