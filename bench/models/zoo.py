#!/usr/bin/env python3
"""zoo.py: the model zoo.  Builds each architecture with seeded random
weights (nothing is downloaded), exports it with torch.onnx.export (opset 17)
and writes, into OUT:

    NAME.onnx          the model
    NAME.in<i>.npy     its inputs, in the graph's input order
    NAME.out<i>.npy    PyTorch's outputs for those inputs

Small configurations (the default) are the CI test data in tests/models/zoo
(tests/models/regen.sh rewrites them); --full makes the real sizes (the GPU
machine; bench/models/gpu.sh).  Transformers are also exported with dynamic
batch and sequence axes as NAME_dyn, whose test input has another batch and
sequence length than the export's example, so a graph that only worked at
the traced sizes fails.

The HF-style models (BERT, GPT-2, Llama, T5) are written here in plain torch
as transformers writes them (eager attention); with --hf and transformers
importable, transformers' own classes are used instead (random init), and a
model whose build or export fails falls back to the hand-written one.

    zoo.py [--out DIR] [--full] [--only a,b] [--dtype f32|f16|bf16] [--device cpu|cuda]
           [--batch N] [--seq N] [--hf] [--list]

--dtype bf16 writes the inputs as f32 (numpy has no bf16; kfuse-run rounds
them) and, as NAME.out<i>.npy, the truth a bf16 result is measured
against: the same model (same seed) in f64 (others.py --dtype bf16 too).
"""
import argparse
import inspect
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The reference is computed in true f32: PyTorch runs convolutions in TF32 on
# Ampere and later unless told not to (cudnn.allow_tf32 defaults to True),
# which leaves ResNet-50's logits ~1e-3 relative away from f32 arithmetic.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False

warnings.filterwarnings("ignore")
OPSET = 17


def randomize_norms(model, seed):
    """Random BatchNorm statistics and affine parameters: with the defaults
    (mean 0, var 1, weight 1, bias 0) a wrong folding would go unnoticed."""
    g = torch.Generator().manual_seed(seed + 1)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
    return model


def other_size(cfg, n, more):
    """The size a dynamic variant's test input has: another one than the
    export's example (n + more) for the CI data, so that a graph that only
    worked at the traced size fails; the same at full size, where gpu.sh
    times the dynamic graph specialised at the benchmark's size."""
    return n if cfg.full else n + more


# ---- torchvision CNNs (need the conv ops) ----------------------------------

def tv():
    import torchvision
    return torchvision.models


def small_resnet(block, layers, k, num_classes=10, **kw):
    """torchvision's ResNet with every width divided by k."""
    from torchvision.models.resnet import ResNet

    class SmallResNet(ResNet):
        def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
            if planes == 64 and self.inplanes == 64:
                self.inplanes = 64 // k
            return super()._make_layer(block, planes // k, blocks, stride, dilate)

    m = SmallResNet(block, layers, num_classes=num_classes, **kw)
    m.conv1 = nn.Conv2d(3, 64 // k, kernel_size=7, stride=2, padding=3, bias=False)
    m.bn1 = nn.BatchNorm2d(64 // k)
    m.fc = nn.Linear(512 * block.expansion // k, num_classes)
    return m


def resnet(depth, full):
    """torchvision's ResNet; small: every width divided by 16."""
    from torchvision.models.resnet import ResNet, BasicBlock, Bottleneck
    block, layers = (BasicBlock, [2, 2, 2, 2]) if depth == 18 else (Bottleneck, [3, 4, 6, 3])
    if full:
        return ResNet(block, layers, num_classes=1000), 224
    return small_resnet(block, layers, 16), 32


def cnn(name, full):
    M = tv()
    if name == "resnet18":
        return resnet(18, full)
    if name == "resnet50":
        return resnet(50, full)
    if name == "mobilenet_v2":
        if full:
            return M.mobilenet_v2(), 224
        # width 0.25 keeps the 1280-wide last conv (a fixed width in
        # torchvision): a 256-wide one keeps the test data small
        from torchvision.ops.misc import Conv2dNormActivation
        m = M.mobilenet_v2(width_mult=0.25, num_classes=10)
        m.features[-1] = Conv2dNormActivation(m.features[-1][0].in_channels, 256, kernel_size=1,
                                              activation_layer=nn.ReLU6)
        m.classifier[-1] = nn.Linear(256, 10)
        return m, 32
    if name == "mobilenet_v3_small":
        if full:
            return M.mobilenet_v3_small(), 224
        return M.mobilenet_v3_small(width_mult=0.25, num_classes=10), 32
    if name == "efficientnet_b0":
        if full:
            return M.efficientnet_b0(), 224
        from torchvision.models.efficientnet import _efficientnet_conf, EfficientNet
        setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.2, depth_mult=0.25)
        return EfficientNet(setting, dropout=0.2, last_channel=last, num_classes=10), 32
    if name == "convnext_tiny":
        if full:
            return M.convnext_tiny(), 224
        from torchvision.models.convnext import ConvNeXt, CNBlockConfig
        cfg = [CNBlockConfig(8, 16, 1), CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 2),
               CNBlockConfig(64, None, 1)]
        return ConvNeXt(cfg, num_classes=10), 32
    if name == "regnet_y_400mf":
        if full:
            return M.regnet_y_400mf(), 224
        from torchvision.models.regnet import RegNet, BlockParams
        bp = BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
        return RegNet(bp, num_classes=10, stem_width=8), 32
    raise KeyError(name)


def make_cnn(name):
    def build(cfg):
        model, res = cnn(name, cfg.full)
        randomize_norms(model, cfg.seed)
        x = torch.randn(cfg.batch or 1, 3, res, res)
        return Entry(model, [x], ["input"], ["logits"])
    return build


def make_vit(cfg):
    from torchvision.models.vision_transformer import VisionTransformer
    if cfg.full:
        model, res = tv().vit_b_16(), 224
    else:
        model, res = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=32,
                                       mlp_dim=64, num_classes=10), 32
    # torchvision initialises the classification head to zero: every logit
    # would be 0 whatever the rest computes, and a check against PyTorch
    # would pass on any graph.  A seeded random head makes it count.
    head = model.heads.head
    with torch.no_grad():
        head.weight.normal_(0, head.in_features ** -0.5)
        head.bias.normal_(0, 0.1)
    b = cfg.batch or 1
    return Entry(model, [torch.randn(b, 3, res, res)], ["input"], ["logits"],
                 dynamic={"input": {0: "batch"}, "logits": {0: "batch"}},
                 test=[torch.randn(other_size(cfg, b, 2), 3, res, res)])


# ---- torch.nn models ----------------------------------------------------------

class MLP(nn.Module):
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        return self.fc3(x)


def make_mlp(cfg):
    d = (1024, 4096, 1024) if cfg.full else (64, 128, 10)
    return Entry(MLP(*d), [torch.randn(cfg.batch or 8, d[0])], ["x"], ["y"])


class EncoderLayerExplicit(nn.Module):
    """nn.TransformerEncoderLayer's post-norm forward with the same weights,
    its attention written out (matmuls and a softmax, the heads split by
    the input's own sizes).  The export when the layer's own fails:
    PyTorch 2.11's TorchScript exporter traces SDPA's is_causal as a tensor
    and stops, and its need_weights path bakes the sequence length into a
    Reshape.  PyTorch still times the layer itself."""
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, src):
        m, a = self.layer, self.layer.self_attn
        b, t, d = src.shape
        q, k, v = F.linear(src, a.in_proj_weight, a.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (y.reshape(b, t, a.num_heads, -1).transpose(1, 2) for y in (q, k, v))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        o = torch.matmul(s.softmax(-1), v).transpose(1, 2).reshape(b, t, d)
        x = m.norm1(src + a.out_proj(o))
        return m.norm2(x + m.linear2(m.activation(m.linear1(x))))


def make_encoder_layer(cfg):
    d, h, ff = (768, 12, 3072) if cfg.full else (32, 4, 64)
    model = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True, activation="gelu")
    b, t = cfg.batch or 2, cfg.seq or (128 if cfg.full else 8)
    return Entry(model, [torch.randn(b, t, d)], ["src"], ["out"],
                 dynamic={"src": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}},
                 test=[torch.randn(other_size(cfg, b, 1), other_size(cfg, t, 3), d)],
                 fallback=EncoderLayerExplicit(model))


class RNNModel(nn.Module):
    def __init__(self, cell, d_in, hidden, layers):
        super().__init__()
        self.rnn = cell(d_in, hidden, num_layers=layers, batch_first=True)

    def forward(self, x):
        y, _ = self.rnn(x)
        return y


def make_rnn(cell):
    def build(cfg):
        d, hid, layers, t = (256, 256, 2, 80) if cfg.full else (16, 32, 2, 6)
        model = RNNModel(cell, d, hid, layers)
        return Entry(model, [torch.randn(cfg.batch or 2, t, d)], ["x"], ["y"])
    return build


# ---- HF-style transformers, as transformers writes them (eager attention) ------

class HFConfig:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab, c.hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(c.max_pos, c.hidden)
        self.token_type_embeddings = nn.Embedding(2, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(c.max_pos).expand((1, -1)), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, 0:seq_length]
        buffered = self.token_type_ids[:, :seq_length]
        token_type_ids = buffered.expand(input_ids.size(0), seq_length)
        emb = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        emb = emb + self.position_embeddings(position_ids)
        return self.LayerNorm(emb)


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.nh, self.hd = c.heads, c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.attn_out = nn.Linear(c.hidden, c.hidden)
        self.ln1 = nn.LayerNorm(c.hidden, eps=1e-12)
        self.intermediate = nn.Linear(c.hidden, c.inter)
        self.output = nn.Linear(c.inter, c.hidden)
        self.ln2 = nn.LayerNorm(c.hidden, eps=1e-12)

    def split(self, x):
        x = x.view(x.size()[:-1] + (self.nh, self.hd))
        return x.permute(0, 2, 1, 3)

    def forward(self, h, mask):
        q, k, v = self.split(self.query(h)), self.split(self.key(h)), self.split(self.value(h))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        probs = F.softmax(scores + mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.nh * self.hd,))
        a = self.ln1(self.attn_out(ctx) + h)
        return self.ln2(self.output(F.gelu(self.intermediate(a))) + a)


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.layers = nn.ModuleList(BertLayer(c) for _ in range(c.layers))
        self.pooler = nn.Linear(c.hidden, c.hidden)

    def forward(self, input_ids, attention_mask):
        h = self.embeddings(input_ids)
        # the mask in the model's dtype, as transformers makes it (an f32
        # mask would promote f16 scores and stop the next matmul)
        ext = attention_mask[:, None, None, :].to(h.dtype)
        ext = (1.0 - ext) * torch.finfo(h.dtype).min
        for layer in self.layers:
            h = layer(h, ext)
        return h, torch.tanh(self.pooler(h[:, 0]))


class Conv1D(nn.Module):
    """GPT-2's linear layer: weight [in, out], through addmm on a 2-D view."""
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.randn(nf) * 0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c.hidden
        self.nh, self.hd = c.heads, e // c.heads
        self.ln_1 = nn.LayerNorm(e, eps=1e-5)
        self.c_attn = Conv1D(3 * e, e)
        self.c_proj = Conv1D(e, e)
        self.ln_2 = nn.LayerNorm(e, eps=1e-5)
        self.c_fc = Conv1D(4 * e, e)
        self.mlp_proj = Conv1D(e, 4 * e)
        p = c.max_pos
        self.register_buffer("bias", torch.tril(torch.ones((p, p), dtype=torch.bool)).view(1, 1, p, p),
                             persistent=False)

    def split_heads(self, t):
        t = t.view(t.size()[:-1] + (self.nh, self.hd))
        return t.permute(0, 2, 1, 3)

    def attn(self, h):
        q, k, v = self.c_attn(h).split(self.nh * self.hd, dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        ql, kl = q.size(-2), k.size(-2)
        causal = self.bias[:, :, kl - ql:kl, :kl]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
        w = torch.where(causal, w, mask_value)
        w = F.softmax(w, dim=-1)
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        a = a.view(a.size()[:-2] + (self.nh * self.hd,))
        return self.c_proj(a)

    def forward(self, h):
        h = h + self.attn(self.ln_1(h))
        return h + self.mlp_proj(gelu_new(self.c_fc(self.ln_2(h))))


class GPT2(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c.vocab, c.hidden)
        self.wpe = nn.Embedding(c.max_pos, c.hidden)
        self.h = nn.ModuleList(GPT2Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.hidden, eps=1e-5)

    def forward(self, input_ids):
        shape = input_ids.size()
        input_ids = input_ids.view(-1, shape[-1])
        pos = torch.arange(0, shape[-1], dtype=torch.long, device=input_ids.device).unsqueeze(0)
        h = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            h = block(h)
        return self.ln_f(h)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.nh, self.nkv, self.hd = c.heads, c.kv_heads, c.hidden // c.heads
        self.q_proj = nn.Linear(c.hidden, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(c.hidden, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(c.hidden, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, c.hidden, bias=False)
        self.gate_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.down_proj = nn.Linear(c.inter, c.hidden, bias=False)
        self.input_layernorm = RMSNorm(c.hidden)
        self.post_attention_layernorm = RMSNorm(c.hidden)

    def repeat_kv(self, x, n_rep):
        b, nkv, s, d = x.shape
        x = x[:, :, None, :, :].expand(b, nkv, n_rep, s, d)
        return x.reshape(b, nkv * n_rep, s, d)

    def forward(self, h, cos, sin, mask):
        b, t, _ = h.size()
        x = self.input_layernorm(h)
        q = self.q_proj(x).view(b, t, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.nkv, self.hd).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k, self.nh // self.nkv), self.repeat_kv(v, self.nh // self.nkv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        w = F.softmax(w + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(b, t, -1)
        h = h + self.o_proj(a)
        x = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(LlamaLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden)
        hd = c.hidden // c.heads
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids):
        b, t = input_ids.shape
        h = self.embed_tokens(input_ids)
        pos = torch.arange(0, t, device=input_ids.device).unsqueeze(0)
        inv = self.inv_freq[None, :, None].float().expand(pos.shape[0], -1, 1)
        freqs = (inv @ pos[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(h.dtype), emb.sin().to(h.dtype)
        mask = torch.full((t, t), torch.finfo(h.dtype).min, dtype=h.dtype, device=h.device)
        mask = torch.triu(mask, diagonal=1)[None, None, :, :]
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return self.norm(h)


class T5Attention(nn.Module):
    def __init__(self, c, has_bias):
        super().__init__()
        self.nh, self.dkv, self.inner = c.heads, c.d_kv, c.heads * c.d_kv
        self.nb, self.maxd = c.buckets, c.max_distance
        self.q = nn.Linear(c.hidden, self.inner, bias=False)
        self.k = nn.Linear(c.hidden, self.inner, bias=False)
        self.v = nn.Linear(c.hidden, self.inner, bias=False)
        self.o = nn.Linear(self.inner, c.hidden, bias=False)
        self.relative_attention_bias = nn.Embedding(self.nb, self.nh) if has_bias else None

    @staticmethod
    def bucket(rel, num_buckets, max_distance):
        buckets = 0
        num_buckets //= 2
        buckets += (rel > 0).to(torch.long) * num_buckets
        rel = torch.abs(rel)
        max_exact = num_buckets // 2
        is_small = rel < max_exact
        large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        return buckets + torch.where(is_small, rel, large)

    def compute_bias(self, ql, kl, device):
        ctx = torch.arange(ql, dtype=torch.long, device=device)[:, None]
        mem = torch.arange(kl, dtype=torch.long, device=device)[None, :]
        b = self.bucket(mem - ctx, self.nb, self.maxd)
        values = self.relative_attention_bias(b)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, h, mask, position_bias):
        b = h.shape[0]

        def shape(s):
            return s.view(b, -1, self.nh, self.dkv).transpose(1, 2)

        q, k, v = shape(self.q(h)), shape(self.k(h)), shape(self.v(h))
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            position_bias = self.compute_bias(h.shape[1], h.shape[1], h.device) + mask
        scores = scores + position_bias
        w = F.softmax(scores.float(), dim=-1).type_as(scores)
        a = torch.matmul(w, v).transpose(1, 2).contiguous().view(b, -1, self.inner)
        return self.o(a), position_bias


class T5Block(nn.Module):
    def __init__(self, c, has_bias):
        super().__init__()
        self.attn = T5Attention(c, has_bias)
        self.ln1 = RMSNorm(c.hidden)
        self.wi = nn.Linear(c.hidden, c.ff, bias=False)
        self.wo = nn.Linear(c.ff, c.hidden, bias=False)
        self.ln2 = RMSNorm(c.hidden)

    def forward(self, h, mask, bias):
        a, bias = self.attn(self.ln1(h), mask, bias)
        h = h + a
        return h + self.wo(F.relu(self.wi(self.ln2(h)))), bias


class T5Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.block = nn.ModuleList(T5Block(c, i == 0) for i in range(c.layers))
        self.final_layer_norm = RMSNorm(c.hidden)

    def forward(self, input_ids, attention_mask):
        h = self.embed_tokens(input_ids)
        # the mask in the model's dtype (as transformers does): an f32 mask
        # promoted the f16 scores to f32 and the next matmul failed
        ext = attention_mask[:, None, None, :].to(h.dtype)
        ext = (1.0 - ext) * torch.finfo(h.dtype).min
        bias = None
        for blk in self.block:
            h, bias = blk(h, ext, bias)
        return self.final_layer_norm(h)


# The configurations: full size is the real model's; small is the CI one.
HF_CFG = {
    "bert": (dict(vocab=30522, hidden=768, layers=12, heads=12, inter=3072, max_pos=512),
             dict(vocab=100, hidden=32, layers=2, heads=4, inter=64, max_pos=64)),
    "gpt2": (dict(vocab=50257, hidden=768, layers=12, heads=12, max_pos=1024),
             dict(vocab=100, hidden=32, layers=2, heads=4, max_pos=64)),
    "llama": (dict(vocab=32000, hidden=2048, layers=4, heads=16, kv_heads=4, inter=5632),
              dict(vocab=100, hidden=32, layers=2, heads=4, kv_heads=2, inter=64)),
    "t5": (dict(vocab=32128, hidden=512, layers=6, heads=8, d_kv=64, ff=2048, buckets=32, max_distance=128),
           dict(vocab=100, hidden=32, layers=2, heads=4, d_kv=8, ff=64, buckets=32, max_distance=128)),
}


def hf_model(kind, c):
    """transformers' own model (random init, eager attention), or None."""
    try:
        import transformers as T
    except ImportError:
        return None
    kw = dict(attn_implementation="eager")
    if kind == "bert":
        cfg = T.BertConfig(vocab_size=c.vocab, hidden_size=c.hidden, num_hidden_layers=c.layers,
                           num_attention_heads=c.heads, intermediate_size=c.inter, max_position_embeddings=c.max_pos,
                           **kw)
        return T.BertModel(cfg, add_pooling_layer=True)
    if kind == "gpt2":
        cfg = T.GPT2Config(vocab_size=c.vocab, n_embd=c.hidden, n_layer=c.layers, n_head=c.heads,
                           n_positions=c.max_pos, **kw)
        return T.GPT2Model(cfg)
    if kind == "llama":
        cfg = T.LlamaConfig(vocab_size=c.vocab, hidden_size=c.hidden, num_hidden_layers=c.layers,
                            num_attention_heads=c.heads, num_key_value_heads=c.kv_heads, intermediate_size=c.inter,
                            **kw)
        return T.LlamaModel(cfg)
    if kind == "t5":
        cfg = T.T5Config(vocab_size=c.vocab, d_model=c.hidden, num_layers=c.layers, num_heads=c.heads, d_kv=c.d_kv,
                         d_ff=c.ff, relative_attention_num_buckets=c.buckets,
                         relative_attention_max_distance=c.max_distance, **kw)
        return T.T5EncoderModel(cfg)
    return None


class HFWrap(nn.Module):
    """transformers' models take keywords and return ModelOutput objects:
    positional inputs, tensor outputs (what the hand-written ones return)."""
    def __init__(self, m, kind):
        super().__init__()
        self.m, self.kind = m, kind

    def forward(self, input_ids, attention_mask=None):
        kw = dict(input_ids=input_ids, return_dict=True, use_cache=False) if self.kind != "bert" else \
            dict(input_ids=input_ids, return_dict=True)
        if self.kind == "t5":
            kw.pop("use_cache")
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask
        out = self.m(**kw)
        if self.kind == "bert":
            return out.last_hidden_state, out.pooler_output
        return out.last_hidden_state


def make_hf(kind):
    def build(cfg):
        hand = {"bert": Bert, "gpt2": GPT2, "llama": Llama, "t5": T5Encoder}[kind]
        b, t = cfg.batch or (1 if cfg.full else 2), cfg.seq or (128 if cfg.full else 8)
        d = dict(HF_CFG[kind][0 if cfg.full else 1])
        # a sequence past the position table (BERT's 512 at 4 x 2048): a
        # table as long as the sequence and the test input's (other_size)
        if "max_pos" in d and t + 3 > d["max_pos"]:
            d["max_pos"] = t + 3
        c = HFConfig(**d)
        g = torch.Generator().manual_seed(cfg.seed + 7)
        ids = torch.randint(1, c.vocab, (b, t), generator=g)
        b2, t2 = other_size(cfg, b, 1), other_size(cfg, t, 3)
        ids2 = torch.randint(1, c.vocab, (b2, t2), generator=g)
        masked = kind in ("bert", "t5")
        inputs, test = [ids], [ids2]
        names = ["input_ids"]
        dyn = {"input_ids": {0: "batch", 1: "seq"}}
        if masked:
            m1 = torch.ones(b, t, dtype=torch.long)
            m1[-1, t - 2:] = 0  # the last sequence is padded: the mask matters
            m2 = torch.ones(b2, t2, dtype=torch.long)
            m2[-1, min(t, t2 - 2):] = 0
            inputs.append(m1)
            test.append(m2)
            names.append("attention_mask")
            dyn["attention_mask"] = {0: "batch", 1: "seq"}
        outs = ["last_hidden_state", "pooler_output"] if kind == "bert" else ["last_hidden_state"]
        dyn["last_hidden_state"] = {0: "batch", 1: "seq"}
        if kind == "bert":
            dyn["pooler_output"] = {0: "batch"}
        model = None
        if cfg.hf:
            hm = hf_model(kind, c)
            model = HFWrap(hm, kind) if hm is not None else None
        return Entry(model or hand(c), inputs, names, outs, dynamic=dyn, test=test,
                     fallback=hand(c) if model is not None else None)
    return build


class Entry:
    def __init__(self, model, inputs, input_names, output_names, dynamic=None, test=None, fallback=None):
        self.model, self.inputs, self.input_names, self.output_names = model, inputs, input_names, output_names
        self.dynamic, self.test, self.fallback = dynamic, test, fallback


ZOO = {
    "resnet18": make_cnn("resnet18"), "resnet50": make_cnn("resnet50"),
    "mobilenet_v2": make_cnn("mobilenet_v2"), "mobilenet_v3_small": make_cnn("mobilenet_v3_small"),
    "efficientnet_b0": make_cnn("efficientnet_b0"), "convnext_tiny": make_cnn("convnext_tiny"),
    "regnet_y_400mf": make_cnn("regnet_y_400mf"), "vit_b_16": make_vit,
    "encoder_layer": make_encoder_layer, "lstm": make_rnn(nn.LSTM), "gru": make_rnn(nn.GRU), "mlp": make_mlp,
    "bert": make_hf("bert"), "gpt2": make_hf("gpt2"), "llama": make_hf("llama"), "t5": make_hf("t5"),
}
# the ones whose import needs the conv, conv_transpose and pooling ops
NEEDS_CONV = {"resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny",
              "regnet_y_400mf", "vit_b_16"}


def to_dtype(xs, dtype):
    return [x.to(dtype) if x.is_floating_point() else x for x in xs]


def export(model, inputs, names, outs, path, dynamic):
    """torch.onnx.export at opset 17 with the TorchScript exporter (what most
    published models went through); a torch whose export no longer has it
    (dynamo=False refused) exports with its default."""
    # nn.MultiheadAttention's fused fast path has no ONNX form: off, where
    # torch has the switch (2.1 on); older ones skip it with grad enabled
    if hasattr(torch.backends, "mha") and hasattr(torch.backends.mha, "set_fastpath_enabled"):
        torch.backends.mha.set_fastpath_enabled(False)
    args = dict(opset_version=OPSET, input_names=names, output_names=outs, dynamic_axes=dynamic,
                do_constant_folding=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        try:
            torch.onnx.export(model, tuple(inputs), path, dynamo=False, **args)
            return
        except (TypeError, NotImplementedError, RuntimeError) as err:
            if "dynamo" not in str(err).lower() and "torchscript" not in str(err).lower():
                raise
            print(f"zoo: {os.path.basename(path)}: the TorchScript exporter is gone ({err}); the default one",
                  file=sys.stderr)
    torch.onnx.export(model, tuple(inputs), path, **args)


def save(path_prefix, inputs, outputs):
    for i, x in enumerate(inputs):
        np.save(f"{path_prefix}.in{i}.npy", x.detach().cpu().numpy())
    for i, y in enumerate(outputs):
        np.save(f"{path_prefix}.out{i}.npy", y.detach().cpu().float().numpy() if y.dtype == torch.bfloat16
                else y.detach().cpu().numpy())


def run(model, inputs):
    with torch.no_grad():
        y = model(*inputs)
    return list(y) if isinstance(y, (tuple, list)) else [y]


def f64_outputs(make_model, seed, xs):
    """The model make_model() builds from seed, in f64, on xs (as f32): the
    truth a low-precision run is measured against (zoo.py and others.py
    --dtype bf16)."""
    torch.manual_seed(seed)
    model = make_model().eval().to(xs[0].device, torch.float64)
    return [y.float() if y.is_floating_point() else y for y in run(model, to_dtype(xs, torch.float64))]


def build_one(name, cfg, out):
    torch.manual_seed(cfg.seed)
    e = ZOO[name](cfg)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}.get(cfg.dtype, torch.float32)
    variants = [(name, None, e.inputs)]
    if e.dynamic:
        variants.append((name + "_dyn", e.dynamic, e.test))
    done = []
    for vname, dyn, test in variants:
        for attempt, model in enumerate([e.model, e.fallback]):
            if model is None:
                continue
            model = model.eval().to(cfg.device, dtype)
            ex = to_dtype([x.to(cfg.device) for x in e.inputs], dtype)
            tin = to_dtype([x.to(cfg.device) for x in test], dtype)
            path = os.path.join(out, vname)
            try:
                # with gradients on: under no_grad, nn.MultiheadAttention and
                # nn.TransformerEncoderLayer take their fused fast path, which
                # the exporter cannot write
                export(model, ex, e.input_names, e.output_names, path + ".onnx", dyn)
                ys = run(model, tin)
                if dtype == torch.bfloat16:
                    tin = to_dtype(tin, torch.float32)
                    ys = f64_outputs(lambda: getattr(ZOO[name](cfg), "fallback" if attempt else "model"), cfg.seed, tin)
                save(path, tin, ys)
                done.append(vname + ("" if attempt == 0 else " (hand-written: transformers' export failed)"))
                break
            except Exception as err:  # noqa: BLE001 -- a zoo entry that fails is reported, the rest go on
                print(f"zoo: {vname}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                      file=sys.stderr)
                if attempt == 1 or e.fallback is None:
                    raise
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="zoo")
    ap.add_argument("--full", action="store_true", help="the real sizes (default: the small CI ones)")
    ap.add_argument("--only", default="", help="comma-separated names")
    ap.add_argument("--skip", default="", help="comma-separated names")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hf", action="store_true", help="use transformers' models when importable")
    ap.add_argument("--list", action="store_true")
    cfg = ap.parse_args()
    names = [n for n in (cfg.only.split(",") if cfg.only else ZOO) if n]
    skip = set(n for n in cfg.skip.split(",") if n)
    if cfg.list:
        for n in ZOO:
            print(n + ("  (needs conv)" if n in NEEDS_CONV else ""))
        return 0
    os.makedirs(cfg.out, exist_ok=True)
    rc = 0
    for n in names:
        if n in skip:
            continue
        if n not in ZOO:
            print(f"zoo: no model '{n}' (--list shows them)", file=sys.stderr)
            return 2
        try:
            for v in build_one(n, cfg, cfg.out):
                print(f"zoo: wrote {v}")
        except Exception as err:  # noqa: BLE001
            print(f"zoo: {n}: FAILED: {type(err).__name__}: {err}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
