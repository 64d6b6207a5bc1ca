#!/usr/bin/python3
"""Writes the real-export seeds of the onnx fuzz target (corpus/onnx/torch_*.onnx):
small PyTorch models (random weights) exported by torch.onnx, so that the fuzzer
starts from what exporters really write (Gemm and MatMul with initializers,
Constant nodes, Shape/Gather/Unsqueeze chains, attention, LSTM/GRU, layer norm).
Sizes are kept small (a few KB to tens of KB).  Needs Debian's python3-torch:

    /usr/bin/python3 tests/fuzz/make_onnx_corpus.py tests/fuzz/corpus/onnx
"""
import os
import sys

import torch
import torch.nn as nn

out = sys.argv[1]
torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return torch.softmax(self.b(torch.nn.functional.gelu(self.a(x))), -1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.att = nn.MultiheadAttention(8, 2, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        h = self.ln(x)
        a, _ = self.att(h, h, h, need_weights=False)
        return x + a + self.ff(self.ln(x + a))


class Rnn(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(4, 8, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class Ops(nn.Module):
    def forward(self, x):
        y = x.reshape(2, 3, 4).transpose(1, 2)
        z = torch.cat([y, y * 2], 1)[:, 1:5]
        return (torch.tanh(z).sum(-1, keepdim=True) / z.shape[-1]).clamp(-1, 1).sqrt()


models = {
    "torch_mlp": (MLP(), torch.randn(2, 8)),
    "torch_block": (Block(), torch.randn(1, 5, 8)),
    "torch_lstm": (Rnn(nn.LSTM), torch.randn(1, 6, 4)),
    "torch_gru": (Rnn(nn.GRU), torch.randn(1, 6, 4)),
    "torch_ops": (Ops(), torch.randn(24)),
}
for name, (m, x) in models.items():
    m.eval()
    path = os.path.join(out, name + ".onnx")
    torch.onnx.export(m, (x,), path, opset_version=17, input_names=["x"], output_names=["y"])
    print(path, os.path.getsize(path))
