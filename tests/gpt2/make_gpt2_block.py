#!/usr/bin/python3
"""Writes tests/gpt2/: a GPT-2-style transformer block (pre-norm, causal
self-attention whose mask is filled with -inf by masked_fill, tanh-GELU MLP,
residuals) with random weights (seeded), exported by PyTorch's own exporter
(torch.onnx.export, opset 17, static shapes) to gpt2_block.onnx, with an
input (x.npy) and PyTorch's output for it (y.npy).

Run with a python that has torch (1.13 here: /usr/bin/python3 on Debian with
python3-torch) and onnx:  /usr/bin/python3 tests/gpt2/make_gpt2_block.py
The test (tests/gpt2/CMakeLists.txt) imports, fuses and runs the file; it
does not need torch.  The export form is what torch 1.13 writes for this
module: LayerNormalization, MatMul + Add for the linears, Split, Reshape and
Transpose for the heads, Where(Equal(mask, 0), -inf, scores) for the mask."""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, D, H = 2, 16, 64, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q = q.view(B, T, H, D // H).transpose(1, 2)
        k = k.view(B, T, H, D // H).transpose(1, 2)
        v = v.view(B, T, H, D // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def main():
    out = os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(2026)
    m = Block().eval()
    with torch.no_grad():  # non-trivial norms
        for ln in (m.ln1, m.ln2):
            ln.weight.normal_(1.0, 0.1)
            ln.bias.normal_(0.0, 0.1)
    x = torch.randn(B, T, D)
    with torch.no_grad():
        y = m(x)
    torch.onnx.export(m, (x,), os.path.join(out, "gpt2_block.onnx"), opset_version=17,
                      input_names=["x"], output_names=["y"], do_constant_folding=True)
    np.save(os.path.join(out, "x.npy"), x.numpy())
    np.save(os.path.join(out, "y.npy"), y.numpy())
    print("wrote gpt2_block.onnx, x.npy, y.npy to", out, file=sys.stderr)


if __name__ == "__main__":
    main()
