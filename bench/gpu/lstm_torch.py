#!/usr/bin/env python3
"""PyTorch baselines for bench/gpu/lstm.sh: the graphs of examples/rnn and
of PyTorch's exported modules (batch 1, input and hidden 256, fp32) as
  torch-eager:   a Python loop over steps with the same cell as the .kf
                 (x_t W_ih^T + h W_hh^T + b, gates i f g o; GRU r z n)
  torch-cudnn:   torch.nn.LSTM / torch.nn.GRU (cuDNN)
  torch-compile: torch.compile of the eager step loop (when it works)
Median over CUDA events.  Prints "graph variant median_us" lines."""
import sys

import torch


def bench(fn, n=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0)
    ts.sort()
    return ts[len(ts) // 2]


def lstm_loop(x, layers):
    for (w_ih, w_hh, b, h, c) in layers:
        ys = []
        for t in range(x.shape[0]):
            g = x[t:t + 1] @ w_ih.t() + h @ w_hh.t() + b
            i, f, gg, o = g.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
            h = torch.sigmoid(o) * torch.tanh(c)
            ys.append(h)
        x = torch.cat(ys, 0)
    return x, h, c


def gru_loop(x, layers):
    for (w_ih, w_hh, b_ih, b_hh, h) in layers:
        ys = []
        for t in range(x.shape[0]):
            a = x[t:t + 1] @ w_ih.t() + b_ih
            r_ = h @ w_hh.t() + b_hh
            ar, az, an = a.chunk(3, 1)
            rr, rz, rn = r_.chunk(3, 1)
            r = torch.sigmoid(ar + rr)
            z = torch.sigmoid(az + rz)
            n = torch.tanh(an + r * rn)
            h = (1 - z) * n + z * h
            ys.append(h)
        x = torch.cat(ys, 0)
    return x, h


def case(name, cell, T, L, H=256, I=256, bi=False):
    """bi: a bidirectional LSTM of one layer (the eager loop runs the
    backward direction over the reversed sequence and joins the two)."""
    dev = "cuda"
    torch.manual_seed(0)
    x = torch.randn(T, I, device=dev)
    rows = []
    if cell == "lstm":
        mod = torch.nn.LSTM(I, H, num_layers=L, bidirectional=bi).to(dev)
        layers, back = [], []
        for l in range(L):
            for sfx, dst in (("", layers), ("_reverse", back)) if bi else (("", layers),):
                w_ih = getattr(mod, "weight_ih_l%d%s" % (l, sfx)).detach()
                w_hh = getattr(mod, "weight_hh_l%d%s" % (l, sfx)).detach()
                b = (getattr(mod, "bias_ih_l%d%s" % (l, sfx)) + getattr(mod, "bias_hh_l%d%s" % (l, sfx))).detach()
                dst.append((w_ih, w_hh, b, torch.zeros(1, H, device=dev), torch.zeros(1, H, device=dev)))
        if bi:
            loop = lambda: (torch.cat([lstm_loop(x, layers)[0], lstm_loop(x.flip(0), back)[0].flip(0)], 1),)
        else:
            loop = lambda: lstm_loop(x, layers)
    else:
        mod = torch.nn.GRU(I, H, num_layers=L).to(dev)
        layers = []
        for l in range(L):
            layers.append(tuple(getattr(mod, "%s_l%d" % (k, l)).detach()
                                for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
                          + (torch.zeros(1, H, device=dev),))
        loop = lambda: gru_loop(x, layers)
    xb = x.unsqueeze(1)
    with torch.no_grad():
        ref = mod(xb)[0].squeeze(1)
        got = loop()[0]
        err = (got - ref).abs().max().item()
        print("# %s: eager loop vs cuDNN max abs diff %.2e" % (name, err), file=sys.stderr)
        rows.append((name, "torch-eager", bench(loop)))
        rows.append((name, "torch-cudnn", bench(lambda: mod(xb))))
        try:
            comp = torch.compile(loop)
            rows.append((name, "torch-compile", bench(comp)))
        except Exception as e:  # Triton or inductor missing: say so
            print("# %s: torch.compile failed: %s" % (name, str(e).splitlines()[0]), file=sys.stderr)
            rows.append((name, "torch-compile", float("nan")))
    for r in rows:
        print("%s %s %.1f" % r)
    sys.stdout.flush()


def main():
    if not torch.cuda.is_available():
        print("lstm_torch.py: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    case("lstm_80x256", "lstm", 80, 1)
    case("lstm_8x256x8l", "lstm", 8, 8)
    case("gru_80x256", "gru", 80, 1)
    # the shapes of the exported models of lstm.sh (torch_*) that the
    # examples lack
    case("gru_80x256x2l", "gru", 80, 2)
    case("bilstm_80x256", "lstm", 80, 1, bi=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
