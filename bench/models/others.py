#!/usr/bin/env python3
"""others.py: real models nobody shaped the importer for.  The zoo
(zoo.py) is what the importer was built against; these are other
torchvision and hand-written architectures, exported the same way
(torch.onnx.export, opset 17, seeded random weights, small sizes), whose
import is the test that the importer is not fitted to the zoo:

    squeezenet    torchvision's Fire modules in a small SqueezeNet
    shufflenet    torchvision ShuffleNetV2 (channel shuffle: reshape/transpose)
    densenet      torchvision DenseNet (concatenated features)
    resnext       torchvision ResNet with grouped bottlenecks
    unet          a small U-Net: max-pool down, bilinear Resize and ConvTranspose up, skip concats, F.pad
    masked_attn   multi-head attention with a boolean padding mask (masked_fill, -inf)
    decoder_layer nn.TransformerDecoderLayer with a causal mask, dynamic batch and sequence
    mixer         an MLP-Mixer block (token mixing by transposes)
    bigru         a bidirectional two-layer GRU
    pad_resize    reflect / replicate / constant padding and nearest / bilinear resizing without convolutions
    gather_ops    embedding bags as exporters write them: index_select, gather by argmax-free indices, take
    (the ones below marked * are exported with dynamic axes and tested at another size)
    swin*         torchvision's Swin Transformer (shifted windows: roll, ScatterND-built masks, relative bias)
    tcn           a temporal conv net: dilated causal Conv1d with weight norm, chomped padding
    video*        Conv3d, BatchNorm3d, MaxPool3d, adaptive 3-D average pooling
    diffusion*    a diffusion U-Net res block: GroupNorm, SiLU, timestep embedding, nearest upsample, PixelShuffle
    style         style transfer: reflection pad, InstanceNorm2d, ConvTranspose2d, tanh
    crossattn*    nn.MultiheadAttention cross-attention with a key padding mask, post-norm, tanh GELU
    cliptext*     a CLIP-style text encoder: causal pre-norm layers, pooling at the argmax token
    conformer*    a Conformer conv module: GLU, depthwise Conv1d, BatchNorm1d, SiLU
    activations*  cumsum positions, mish, softplus, hardswish, elu, leaky relu, clamp, log_softmax, std
    moe           top-1 mixture of experts: argmax routing, one_hot, einsum experts
    retrieval     F.normalize, cosine similarity, masked_fill(-inf), pixel_unshuffle, GLU
    resample      bilinear (align_corners) and nearest interpolate, adaptive pools, flip, roll
    bicubic       bicubic interpolation (cubic Resize) of activations, with and without aligned corners,
                  and of a learned position table, as DINOv2 and DeiT III resize theirs
    shiftpad      MobileBERT's trigram embedding: F.pad of shifted slices, whose pads the exporter
                  builds by concatenating an empty ConstantOfShape (a fold of empty operands)
    unrolled      a hand-written recurrent cell over 100 steps, traced: Split and Concat of 100
    stdconv       timm's weight-standardised conv (StdConv2d: F.batch_norm in training mode over
                  the weight: BatchNormalization with training_mode=1), timm's same padding

    others.py [--out DIR] [--only a,b] [--list] [--large] [--dtype bf16]
Writes NAME.onnx, NAME.in<i>.npy and NAME.out<i>.npy as zoo.py does.
--dtype bf16: the model converted to bf16 (model.to(torch.bfloat16), as a
user runs one natively) and exported so; the inputs are written as f32
(numpy has no bf16: kfuse-run rounds them) and NAME.out<i>.npy is the truth
the bf16 result is measured against, the same model (same seed) in f64.
A model whose ops this torch cannot run in bf16 on the CPU is skipped.
"""
import argparse
import math
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import Entry, export, f64_outputs, randomize_norms, run, save, small_resnet, to_dtype  # noqa: E402

warnings.filterwarnings("ignore")


def squeezenet():
    from torchvision.models.squeezenet import Fire
    m = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(16, 4, 8, 8), Fire(16, 4, 8, 8), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(16, 8, 16, 16),
        nn.Dropout(0.5), nn.Conv2d(32, 10, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten())
    return Entry(m, [torch.randn(1, 3, 48, 48)], ["input"], ["logits"])


def shufflenet():
    from torchvision.models.shufflenetv2 import ShuffleNetV2
    m = ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10)
    return Entry(randomize_norms(m, 1), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])


def densenet():
    from torchvision.models.densenet import DenseNet
    m = DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, bn_size=2, num_classes=10)
    return Entry(randomize_norms(m, 2), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])


def resnext():
    from torchvision.models.resnet import Bottleneck
    m = small_resnet(Bottleneck, [1, 1, 1, 1], 16, groups=4, width_per_group=64)
    return Entry(randomize_norms(m, 3), [torch.randn(1, 3, 32, 32)], ["input"], ["logits"])


class UNet(nn.Module):
    def __init__(self, c=8):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
        self.d1, self.d2, self.d3 = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.u2 = block(4 * c, 2 * c)
        self.u1 = block(3 * c, c)
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        c = self.d3(F.max_pool2d(b, 2))
        u = self.u2(torch.cat([self.up2(c), b], 1))
        u = F.interpolate(u, scale_factor=2.0, mode="bilinear", align_corners=False)
        u = F.pad(u, (0, 0, 0, 0))
        return self.head(self.u1(torch.cat([u, a], 1)))


def unet():
    return Entry(randomize_norms(UNet(), 4), [torch.randn(1, 3, 32, 32)], ["image"], ["mask"])


class MaskedAttention(nn.Module):
    def __init__(self, d=32, h=4):
        super().__init__()
        self.h, self.hd = h, d // h
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, pad):  # pad: bool [B, T], True where padded
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.h, self.hd).transpose(1, 2) for z in (q, k, v))
        s = q @ k.transpose(-2, -1) * self.hd ** -0.5
        s = s.masked_fill(pad[:, None, None, :], float("-inf"))
        a = torch.softmax(s, dim=-1) @ v
        return self.out(a.transpose(1, 2).reshape(b, t, d))


def masked_attn():
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    return Entry(MaskedAttention(), [torch.randn(2, 6, 32), pad], ["x", "pad"], ["y"])


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    def forward(self, tgt, memory):
        t = tgt.size(1)
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.layer(tgt, memory, tgt_mask=causal)


def decoder_layer():
    return Entry(Decoder(), [torch.randn(2, 5, 32), torch.randn(2, 7, 32)], ["tgt", "memory"], ["out"],
                 dynamic={"tgt": {0: "batch", 1: "tgt_len"}, "memory": {0: "batch", 1: "mem_len"},
                          "out": {0: "batch", 1: "tgt_len"}},
                 test=[torch.randn(3, 4, 32), torch.randn(3, 9, 32)])


class Mixer(nn.Module):
    def __init__(self, tokens=16, d=32):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
        self.ch = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.ln2(x))


def mixer():
    return Entry(Mixer(), [torch.randn(2, 16, 32)], ["x"], ["y"])


class BiGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(12, 16, num_layers=2, batch_first=True, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)[0]


def bigru():
    return Entry(BiGRU(), [torch.randn(2, 5, 12)], ["x"], ["y"])


class PadResize(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):  # x: [N, C, H, W]
        y = self.lin(x)
        a = F.pad(y, (1, 2, 2, 1), mode="reflect")
        b = F.pad(y, (2, 0, 0, 1), mode="replicate")
        c = F.pad(y, (1, 1, 1, 1), value=0.5)
        up = F.interpolate(a, scale_factor=2.0, mode="nearest")
        bl = F.interpolate(b, size=(12, 20), mode="bilinear", align_corners=True)
        dn = F.interpolate(c, size=(5, 5), mode="bilinear", align_corners=False)
        return up, bl, dn


def pad_resize():
    return Entry(PadResize(), [torch.randn(1, 3, 6, 8)], ["x"], ["up", "bilinear", "down"])


class GatherOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(20, 6))

    def forward(self, ids, x):
        a = torch.index_select(self.table, 0, ids.flatten()).reshape(ids.shape + (6,))
        b = x[:, ids[1]]            # a gather on axis 1 with data-dependent indices
        c = x[:, -1] + x[:, 0]      # constant indices on a tensor
        d = self.table[3:7].sum(0)  # a slice of a constant
        return a.sum(1) + d, b, c


def gather_ops():
    ids = torch.tensor([[1, 5, 19], [0, 2, 2]])
    return Entry(GatherOps(), [ids, torch.randn(4, 7)], ["ids", "x"], ["bag", "picked", "ends"])


# round 2, session 4: architectures tried after the zoo and the first others
# (each needed something: ScatterND, Dropout(p=0) in training mode, ArgMax,
# InstanceNormalization for GroupNorm, DepthToSpace, CumSum, ReduceProd)

def swin():
    """torchvision's Swin Transformer, small: shifted windows (roll, ScatterND masks)."""
    from torchvision.models.swin_transformer import SwinTransformer
    m = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10)
    return Entry(m, [torch.randn(1, 3, 64, 64)], ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}},
                 [torch.randn(3, 3, 64, 64)])

class TCN(nn.Module):
    def __init__(s):
        super().__init__()
        s.convs = nn.ModuleList([nn.utils.weight_norm(nn.Conv1d(8 if i else 4, 8, 3, dilation=2**i, padding=2*2**i)) for i in range(3)])
        s.out = nn.Linear(8, 2)
    def forward(s, x):
        for c in s.convs:
            y = c(x)[:, :, :-c.padding[0]]
            x = F.relu(y) + (x if x.shape[1] == y.shape[1] else 0)
        return s.out(x[:, :, -1])
def tcn(): return Entry(TCN(), [torch.randn(2, 4, 30)], ["x"], ["y"])

class Video(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv3d(3, 8, (3, 3, 3), padding=1); s.bn = nn.BatchNorm3d(8)
        s.pool = nn.MaxPool3d((1, 2, 2)); s.c2 = nn.Conv3d(8, 8, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        s.fc = nn.Linear(8, 5)
    def forward(s, x):
        x = s.pool(F.relu(s.bn(s.c1(x))))
        x = F.relu(s.c2(x))
        return s.fc(F.adaptive_avg_pool3d(x, 1).flatten(1))
def video():
    return Entry(randomize_norms(Video(), 11), [torch.randn(1, 3, 4, 16, 16)], ["x"], ["y"],
                 {"x": {0: "batch", 2: "frames"}, "y": {0: "batch"}}, [torch.randn(2, 3, 6, 16, 16)])

class ResBlockT(nn.Module):  # diffusion U-Net res block: GroupNorm, SiLU, timestep embedding
    def __init__(s, c=16, t=8):
        super().__init__()
        s.n1 = nn.GroupNorm(4, c); s.c1 = nn.Conv2d(c, c, 3, padding=1)
        s.emb = nn.Linear(t, c); s.n2 = nn.GroupNorm(4, c); s.c2 = nn.Conv2d(c, c, 3, padding=1)
        s.up = nn.Upsample(scale_factor=2, mode="nearest"); s.ps = nn.PixelShuffle(2); s.cps = nn.Conv2d(c, 4 * 3, 3, padding=1)
    def forward(s, x, t):
        h = s.c1(F.silu(s.n1(x)))
        h = h + s.emb(F.silu(t))[:, :, None, None]
        h = s.c2(F.silu(s.n2(h))) + x
        h = s.up(h)
        return s.ps(s.cps(h))
def diffusion():
    return Entry(ResBlockT(), [torch.randn(2, 16, 8, 8), torch.randn(2, 8)], ["x", "t"], ["y"],
                 {"x": {0: "batch"}, "t": {0: "batch"}, "y": {0: "batch"}}, [torch.randn(3, 16, 8, 8), torch.randn(3, 8)])

class Style(nn.Module):
    def __init__(s):
        super().__init__()
        s.p = nn.ReflectionPad2d(2); s.c = nn.Conv2d(3, 8, 5); s.n = nn.InstanceNorm2d(8, affine=True)
        s.d = nn.ConvTranspose2d(8, 3, 3, stride=2, padding=1, output_padding=1)
    def forward(s, x):
        h = F.relu(s.n(s.c(s.p(x))))
        return torch.tanh(s.d(h))
def style(): return Entry(Style(), [torch.randn(1, 3, 20, 20)], ["x"], ["y"])

class CrossAttn(nn.Module):
    def __init__(s):
        super().__init__()
        s.mha = nn.MultiheadAttention(32, 4, batch_first=True); s.ln = nn.LayerNorm(32)
        s.ff = nn.Sequential(nn.Linear(32, 64), nn.GELU(approximate="tanh"), nn.Linear(64, 32))
    def forward(s, q, kv, pad):
        a, _ = s.mha(q, kv, kv, key_padding_mask=pad, need_weights=False)
        h = s.ln(q + a)
        return h + s.ff(h)
def crossattn():
    pad = torch.zeros(2, 7, dtype=torch.bool); pad[1, 5:] = True
    pad2 = torch.zeros(3, 9, dtype=torch.bool)
    pad2[0, 6:] = True
    return Entry(CrossAttn(), [torch.randn(2, 5, 32), torch.randn(2, 7, 32), pad], ["q", "kv", "pad"], ["y"],
                 {"q": {0: "batch", 1: "tq"}, "kv": {0: "batch", 1: "tk"}, "pad": {0: "batch", 1: "tk"},
                  "y": {0: "batch", 1: "tq"}}, [torch.randn(3, 6, 32), torch.randn(3, 9, 32), pad2])

class CLIPText(nn.Module):
    def __init__(s, v=50, d=32, t=8):
        super().__init__()
        s.tok = nn.Embedding(v, d); s.pos = nn.Parameter(torch.randn(t, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True, norm_first=True, activation="gelu")
        s.enc = nn.TransformerEncoder(layer, 2); s.ln = nn.LayerNorm(d); s.proj = nn.Linear(d, 16, bias=False)
        s.register_buffer("mask", torch.full((t, t), float("-inf")).triu(1))
    def forward(s, ids):
        x = s.tok(ids) + s.pos
        x = s.ln(s.enc(x, mask=s.mask))
        x = x[torch.arange(x.shape[0]), ids.argmax(dim=-1)]
        return s.proj(x)
def cliptext():
    return Entry(CLIPText(), [torch.randint(0, 50, (3, 8))], ["ids"], ["y"], {"ids": {0: "batch"}, "y": {0: "batch"}},
                 [torch.randint(0, 50, (5, 8))])

class ConformerConv(nn.Module):
    def __init__(s, d=16):
        super().__init__()
        s.ln = nn.LayerNorm(d); s.pw1 = nn.Conv1d(d, 2 * d, 1); s.dw = nn.Conv1d(d, d, 7, padding=3, groups=d)
        s.bn = nn.BatchNorm1d(d); s.pw2 = nn.Conv1d(d, d, 1)
    def forward(s, x):
        h = s.ln(x).transpose(1, 2)
        h = F.glu(s.pw1(h), dim=1)
        h = s.pw2(F.silu(s.bn(s.dw(h))))
        return x + h.transpose(1, 2)
def conformer():
    return Entry(randomize_norms(ConformerConv(), 12), [torch.randn(2, 20, 16)], ["x"], ["y"],
                 {"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}}, [torch.randn(3, 33, 16)])

class Activations(nn.Module):  # cumsum positions, clamp, where, mish, softplus, hardswish, elu, log_softmax, std
    def __init__(s):
        super().__init__(); s.l = nn.Linear(12, 12)
    def forward(s, x, m):
        pos = torch.cumsum(m.long(), dim=1) * m.long()
        h = s.l(x) + pos[..., None].float() * 0.01
        h = F.mish(h) + F.softplus(h) - F.hardswish(h) + F.elu(h) + F.leaky_relu(h, 0.1)
        h = torch.where(m[..., None], h, torch.zeros_like(h)).clamp(-3, 3)
        return F.log_softmax(h, dim=-1), h.amax(dim=1), h.std(dim=-1)
def activations():
    m = torch.rand(2, 6) > 0.3
    return Entry(Activations(), [torch.randn(2, 6, 12), m], ["x", "m"], ["y", "mx", "sd"],
                 {"x": {0: "batch", 1: "t"}, "m": {0: "batch", 1: "t"}, "y": {0: "batch", 1: "t"}, "mx": {0: "batch"},
                  "sd": {0: "batch", 1: "t"}}, [torch.randn(3, 9, 12), torch.rand(3, 9) > 0.3])

# the third batch (session 4): seven more written without the importer in view;
# six imported and matched at once (the seventh, EmbeddingBag, exports an ONNX Loop)

class MoE(nn.Module):  # top-1 routing by argmax, one_hot dispatch, einsum experts
    def __init__(s, d=16, e=4, h=32):
        super().__init__(); s.gate = nn.Linear(d, e); s.w1 = nn.Parameter(torch.randn(e, d, h) * 0.2); s.w2 = nn.Parameter(torch.randn(e, h, d) * 0.2)
    def forward(s, x):
        g = torch.softmax(s.gate(x), -1)
        idx = g.argmax(-1)
        oh = F.one_hot(idx, g.shape[-1]).to(x.dtype)
        w = (g * oh).sum(-1, keepdim=True)
        h = F.gelu(torch.einsum("btd,edh->bteh", x, s.w1))
        y = torch.einsum("bteh,ehd->bted", h, s.w2)
        return (y * oh[..., None]).sum(2) * w
def moe(): return Entry(MoE(), [torch.randn(2, 5, 16)], ["x"], ["y"])

class Retrieval(nn.Module):  # normalize, cosine similarity, pixel unshuffle, glu, masked_fill
    def __init__(s):
        super().__init__(); s.p = nn.Linear(12, 16)
    def forward(s, q, k, img):
        qn = F.normalize(s.p(q), dim=-1); kn = F.normalize(s.p(k), dim=-1)
        sim = qn @ kn.transpose(-1, -2)
        sim = sim.masked_fill(sim < -0.5, float("-inf"))
        z = F.pixel_unshuffle(img, 2)
        return torch.softmax(sim * 10, -1), F.glu(z, dim=1), F.cosine_similarity(q, k[:, :q.shape[1]], dim=-1)
def retrieval(): return Entry(Retrieval(), [torch.randn(2, 4, 12), torch.randn(2, 6, 12), torch.randn(1, 4, 8, 8)], ["q", "k", "img"], ["p", "g", "c"])

class Resample(nn.Module):
    def forward(s, x):
        a = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
        b = F.interpolate(x, size=(7, 5), mode="nearest")
        c = F.adaptive_avg_pool2d(x, (2, 2)); d = F.adaptive_max_pool2d(x, 1)
        return a, b, c + d, torch.flip(x, dims=[-1]), torch.roll(x, 1, dims=2)
def resample(): return Entry(Resample(), [torch.randn(1, 2, 4, 6)], ["x"], ["a", "b", "c", "f", "r"])


class Unrolled(nn.Module):
    """A hand-written recurrent cell over 100 steps, as a user writes one in
    Python: tracing unrolls the loop into a Split of 100 outputs, 100 steps
    and a Concat of 100 (the importer took at most 64)."""
    def __init__(self):
        super().__init__()
        self.wx, self.wh = nn.Linear(6, 8), nn.Linear(8, 8, bias=False)

    def forward(self, x):
        h = x.new_zeros(x.shape[0], 8)
        hs = []
        for xt in torch.split(x, 1, dim=1):
            h = torch.tanh(self.wx(xt[:, 0]) + self.wh(h))
            hs.append(h)
        return torch.stack(hs, dim=1)
def unrolled(): return Entry(Unrolled(), [torch.randn(2, 100, 6)], ["x"], ["h"])


# Large torchvision models, written the same way (session 4; session 19 added
# the segmentation heads, MaxViT and the (2+1)-D and mixed 3-D video nets) but
# not committed (4 to 270 MB each): `others.py --large --out DIR` writes them;
# tests/models/run_model.sh and test_plan_emu (KF_EMU_MODELS) take them from there.
def tvm():
    import torchvision.models as m
    return m


class Bicubic(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 6, 4, 4))
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        a = F.interpolate(y, scale_factor=1.75, mode="bicubic", align_corners=False)
        b = F.interpolate(y, size=(5, 11), mode="bicubic", align_corners=True)
        p = F.interpolate(self.pos, size=(7, 7), mode="bicubic", align_corners=False)
        return a, b, y[:, :, :7, :7] + p


def bicubic():
    return Entry(Bicubic(), [torch.randn(2, 3, 7, 9)], ["x"], ["a", "b", "c"])


class ShiftPad(nn.Module):
    """MobileBERT's embedding of a token with its neighbours."""
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 8)

    def forward(self, x):
        x = torch.cat([F.pad(x[:, 1:], [0, 0, 0, 1, 0, 0], value=0.0), x,
                       F.pad(x[:, :-1], [0, 0, 1, 0, 0, 0], value=0.0)], dim=2)
        return self.proj(x)


def shiftpad():
    return Entry(ShiftPad(), [torch.randn(2, 7, 4)], ["x"], ["y"])


class StdConv(nn.Conv2d):
    """timm's StdConv2d (NF-ResNets, BiT): the weight standardised per
    output channel by F.batch_norm in training mode, which exports as
    BatchNormalization with training_mode=1; then timm's same padding for
    stride 2, whose amount is ceil arithmetic on the input's size."""
    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None, training=True, momentum=0.,
                         eps=1e-6).reshape_as(self.weight)
        ih = x.shape[-1]
        s, k = self.stride[0], self.kernel_size[0]
        pad = max((math.ceil(ih / s) - 1) * s + k - ih, 0)
        x = F.pad(x, [pad // 2, pad - pad // 2, pad // 2, pad - pad // 2])
        return F.conv2d(x, w, self.bias, self.stride)


def stdconv():
    m = nn.Sequential(StdConv(3, 8, 3, stride=2), nn.ReLU(), StdConv(8, 6, 3), nn.SiLU(), StdConv(6, 4, 1))
    return Entry(m, [torch.randn(1, 3, 17, 17)], ["input"], ["out"])


def googlenet():
    m = tvm().GoogLeNet(num_classes=10, aux_logits=False, init_weights=True)
    return Entry(randomize_norms(m, 3), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])
def inception():
    m = tvm().Inception3(num_classes=10, aux_logits=False, init_weights=True)
    return Entry(randomize_norms(m, 4), [torch.randn(1, 3, 80, 80)], ["input"], ["logits"])
def mnasnet():
    m = tvm().mnasnet0_5(num_classes=10)
    return Entry(randomize_norms(m, 5), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])
def mbv3_large():
    m = tvm().mobilenet_v3_large(num_classes=10)
    return Entry(randomize_norms(m, 6), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])
def regnet_x():
    m = tvm().regnet_x_400mf(num_classes=10)
    return Entry(randomize_norms(m, 7), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])
def effv2():
    m = tvm().efficientnet_v2_s(num_classes=10)
    return Entry(randomize_norms(m, 8), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])
def alexnet():
    m = tvm().alexnet(num_classes=10)
    return Entry(m, [torch.randn(1, 3, 224, 224)], ["input"], ["logits"])
def vgg():
    m = tvm().vgg11_bn(num_classes=10)
    m.classifier = nn.Sequential(nn.Linear(512*7*7, 64), nn.ReLU(True), nn.Dropout(), nn.Linear(64, 10))
    return Entry(randomize_norms(m, 9), [torch.randn(1, 3, 224, 224)], ["input"], ["logits"])
def wide():
    m = tvm().wide_resnet50_2(num_classes=10)
    return Entry(randomize_norms(m, 10), [torch.randn(1, 3, 64, 64)], ["input"], ["logits"])


class DenseOut(nn.Module):
    """torchvision's segmentation models return {"out": ...}: the tensor."""
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


def _seg(build, seed):
    m = build(num_classes=5, weights_backbone=None, **({} if build.__name__.startswith("lraspp") else {"aux_loss": False}))
    return Entry(DenseOut(randomize_norms(m, seed)), [torch.randn(1, 3, 96, 96)], ["input"], ["mask"])
def deeplab():
    from torchvision.models import segmentation
    return _seg(segmentation.deeplabv3_mobilenet_v3_large, 11)
def lraspp():
    from torchvision.models import segmentation
    return _seg(segmentation.lraspp_mobilenet_v3_large, 12)
def fcn():
    from torchvision.models import segmentation
    return _seg(segmentation.fcn_resnet50, 13)
def maxvit():
    m = tvm().maxvit_t(num_classes=10)
    return Entry(randomize_norms(m, 14), [torch.randn(1, 3, 224, 224)], ["input"], ["logits"])
def r2plus1d():
    from torchvision.models import video
    return Entry(randomize_norms(video.r2plus1d_18(num_classes=10), 15), [torch.randn(1, 3, 8, 56, 56)], ["input"],
                 ["logits"])
def mc3():
    from torchvision.models import video
    return Entry(randomize_norms(video.mc3_18(num_classes=10), 16), [torch.randn(1, 3, 8, 56, 56)], ["input"],
                 ["logits"])


OTHERS = {
    "squeezenet": squeezenet, "shufflenet": shufflenet, "densenet": densenet, "resnext": resnext,
    "unet": unet, "masked_attn": masked_attn, "decoder_layer": decoder_layer, "mixer": mixer, "bigru": bigru,
    "pad_resize": pad_resize, "gather_ops": gather_ops,
    "swin": swin, "tcn": tcn, "video": video, "diffusion": diffusion, "style": style, "crossattn": crossattn,
    "cliptext": cliptext, "conformer": conformer, "activations": activations,
    "moe": moe, "retrieval": retrieval, "resample": resample, "stdconv": stdconv, "shiftpad": shiftpad, "bicubic": bicubic,
    "unrolled": unrolled,
}
LARGE = {
    "googlenet": googlenet, "inception": inception, "mnasnet": mnasnet, "mbv3_large": mbv3_large,
    "regnet_x": regnet_x, "effv2": effv2, "alexnet": alexnet, "vgg": vgg, "wide": wide,
    "deeplab": deeplab, "lraspp": lraspp, "fcn": fcn, "maxvit": maxvit, "r2plus1d": r2plus1d, "mc3": mc3,
}
NEEDS_CONV = {"squeezenet", "shufflenet", "densenet", "resnext", "unet", "swin", "tcn", "video", "diffusion", "style",
              "conformer", "stdconv", "bicubic"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="others")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--large", action="store_true", help="the large torchvision CNNs (not test data) instead")
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    a = ap.parse_args()
    models = LARGE if a.large else OTHERS
    if a.list:
        for n in models:
            print(n + ("  (needs conv)" if n in NEEDS_CONV else ""))
        return 0
    os.makedirs(a.out, exist_ok=True)
    rc = 0
    for i, n in enumerate(models):
        if a.only and n not in a.only.split(","):
            continue
        seed = (300 if a.large else 100) + i
        torch.manual_seed(seed)
        try:
            e = models[n]()
            model = e.model.eval()
            path = os.path.join(a.out, n)
            test = e.test or e.inputs
            if a.dtype == "bf16":
                model = model.to(torch.bfloat16)
                bf16 = to_dtype(test, torch.bfloat16)
                export(model, to_dtype(e.inputs, torch.bfloat16), e.input_names, e.output_names, path + ".onnx",
                       e.dynamic)
                run(model, bf16)  # a model this torch cannot run in bf16 stops here
                xs = to_dtype(bf16, torch.float32)
                save(path, xs, f64_outputs(lambda: models[n]().model, seed, xs))
            else:
                export(model, e.inputs, e.input_names, e.output_names, path + ".onnx", e.dynamic)
                save(path, test, run(model, test))
            print(f"others: wrote {n}")
        except Exception as err:  # noqa: BLE001 -- report and go on
            print(f"others: {n}: FAILED: {type(err).__name__}: {err}", file=sys.stderr)
            for f in os.listdir(a.out):  # no half-written model
                if f.startswith(n + "."):
                    os.remove(os.path.join(a.out, f))
            rc = 1 if a.dtype == "f32" else rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
