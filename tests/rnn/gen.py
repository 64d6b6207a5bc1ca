#!/usr/bin/env python3
"""gen.py: PyTorch recurrences exported to ONNX, the test data of tests/rnn
(issue 22: every exported recurrence becomes one persistent kernel).

Writes into OUT, for each configuration NAME:

    NAME.onnx          torch.onnx.export (opset 17) of the model
    NAME.in<i>.npy     its inputs, in the graph's input order
    NAME.out<i>.npy    PyTorch's outputs for those inputs
    MANIFEST           one line per model: NAME PERSISTENT, the number of
                       `fusion {kind = "persistent"}` nodes the `persistent`
                       pass must leave (one per recurrence, or per stack of
                       layers, or per pair of directions)

The sizes (input and hidden width, steps, batch, layers) are drawn from a
seeded generator: nobody here chose them.  Steps start at 3: a recurrence of
two steps whose second lacks a node (a masked state nobody reads, removed
as dead code) does not show which way its inputs move, and with a zero
initial state and small (inline) weights step 0's matmul folds away, which
leaves two steps only one matmul.  The matrix covers what the issue
lists: nn.LSTM / nn.GRU / nn.RNN (tanh and relu) with weights as constants
or as graph inputs (export_params=False), zero or given initial state,
seq-first or batch-first, 1..4 layers (an ONNX node per layer),
bidirectional, batch > 1, a Linear head after the loop, sequence lengths
(a packed sequence), and the same recurrences as a Python loop over
LSTMCell / GRUCell / RNNCell (or the cell's arithmetic written out with the
weights as inputs) traced by the exporter.

    gen.py [--out DIR] [--only NAME,...] [--list]
    gen.py --bench DIR    the GPU benchmark's models (bench/gpu/lstm.sh):
                          nn.LSTM 1 layer hidden 256, 80 steps, batch 1;
                          8 layers x 8 steps; a 2-layer GRU; a bidirectional
                          LSTM (hidden 256, batch 1), each with its inputs

Needs torch (1.13 or newer) and onnx: /usr/bin/python3 here.
"""
import argparse
import inspect
import io
import os
import random
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

warnings.filterwarnings("ignore")
OPSET = 17


class Net(nn.Module):
    """nn.LSTM / GRU / RNN, with an optional Linear head; returns y (after
    the head) and, with hn, the final hidden state."""

    def __init__(s, c):
        super().__init__()
        kw = dict(num_layers=c["layers"], bidirectional=c["bi"], batch_first=c["bf"])
        if c["kind"].startswith("rnn"):
            kw["nonlinearity"] = "relu" if c["kind"] == "rnn_relu" else "tanh"
        s.c = c
        s.rnn = {"lstm": nn.LSTM, "gru": nn.GRU}.get(c["kind"], nn.RNN)(c["inp"], c["hid"], **kw)
        s.head = nn.Linear(c["hid"] * (2 if c["bi"] else 1), c["out"]) if c["head"] else None

    def forward(s, x, *rest):
        c = s.c
        lens, state = None, None
        if c["lens"]:
            lens, rest = rest[0], rest[1:]
        if c["init"] == "given":
            state = (rest[0], rest[1]) if c["kind"] == "lstm" else rest[0]
        if lens is not None:
            p = pack_padded_sequence(x, lens, batch_first=c["bf"], enforce_sorted=True)
            y, hc = s.rnn(p, state)
            y, _ = pad_packed_sequence(y, batch_first=c["bf"], total_length=x.shape[1 if c["bf"] else 0])
        else:
            y, hc = s.rnn(x, state)
        if s.head is not None:
            y = s.head(y)
        h = hc[0] if c["kind"] == "lstm" else hc
        return (y, h) if c["hn"] else y


class Loop(nn.Module):
    """The same recurrence as a Python loop over LSTMCell / GRUCell /
    RNNCell (traced: every step written out), or with "manual" the cell's
    arithmetic written out with the weights as graph inputs."""

    def __init__(s, c):
        super().__init__()
        s.c = c
        cell = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}.get(c["kind"], nn.RNNCell)
        kw = {"nonlinearity": "relu"} if c["kind"] == "rnn_relu" else {}
        s.cell = cell(c["inp"], c["hid"], **kw)
        s.head = nn.Linear(c["hid"], c["out"]) if c["head"] else None

    def step(s, x, h, cc, w):
        c = s.c
        if not c["manual"]:
            if c["kind"] == "lstm":
                return s.cell(x, (h, cc))
            return s.cell(x, h), None
        wi, wh, bi, bh = w
        gx, gh = x @ wi.t() + bi, h @ wh.t() + bh
        if c["kind"] == "lstm":
            i, f, g, o = (gx + gh).chunk(4, 1)
            c2 = torch.sigmoid(f) * cc + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c2), c2
        if c["kind"] == "gru":
            xr, xz, xn = gx.chunk(3, 1)
            hr, hz, hn = gh.chunk(3, 1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            return (1 - z) * n + z * h, None
        a = gx + gh
        return (torch.relu(a) if c["kind"] == "rnn_relu" else torch.tanh(a)), None

    def forward(s, x, *rest):
        c = s.c
        B = x.shape[0] if c["bf"] else x.shape[1]
        T = x.shape[1] if c["bf"] else x.shape[0]
        w = rest[-4:] if c["manual"] else None
        if c["init"] == "given":
            h, cc = rest[0], (rest[1] if c["kind"] == "lstm" else None)
        else:
            h = torch.zeros(B, c["hid"])
            cc = torch.zeros(B, c["hid"]) if c["kind"] == "lstm" else None
        ys = []
        for t in range(T):
            h, cc = s.step(x[:, t] if c["bf"] else x[t], h, cc, w)
            ys.append(h)
        y = torch.stack(ys, 1 if c["bf"] else 0)
        if s.head is not None:
            y = s.head(y)
        return (y, h) if c["hn"] else y


def uniform(shape, k, g):
    return (torch.rand(*shape, generator=g) * 2 - 1) * k


def build(c, seed):
    """The model and its example inputs (PyTorch's initialisation: the
    recurrence is not chaotic, so 1e-4 means something)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    m = (Loop if c["form"] == "loop" else Net)(c).eval()
    T, B = c["steps"], c["batch"]
    x = uniform((B, T, c["inp"]) if c["bf"] else (T, B, c["inp"]), 1.0, g)
    ins, names = [x], ["x"]
    if c["lens"]:
        # descending (enforce_sorted), the first the whole sequence
        lens = sorted([T] + [random.Random(seed).randint(1, T) for _ in range(B - 1)], reverse=True)
        ins.append(torch.tensor(lens, dtype=torch.int64))
        names.append("lens")
    if c["init"] == "given":
        D = (2 if c.get("bi") else 1) * (c["layers"] if c["form"] == "module" else 1)
        shape = (D, B, c["hid"]) if c["form"] == "module" else (B, c["hid"])
        ins.append(uniform(shape, 1.0, g))
        names.append("h0")
        if c["kind"] == "lstm":
            ins.append(uniform(shape, 1.0, g))
            names.append("c0")
    if c.get("manual"):
        p = dict(m.cell.named_parameters())
        for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            ins.append(p[n].detach().clone())
            names.append(n)
    return m, ins, names


def export(m, ins, names, path, params=True):
    """torch.onnx.export to path; without params the weights become graph
    inputs, whose values (as the exporter transformed them: gates reordered,
    biases joined) come from an export with them, matched by name."""
    kw = dict(opset_version=OPSET, input_names=names, do_constant_folding=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        # the TorchScript exporter (one ONNX node per layer), where a newer
        # torch defaults to another
        kw["dynamo"] = False
    torch.onnx.export(m, tuple(ins), path, export_params=params, **kw)
    if params:
        return []
    import onnx
    from onnx import numpy_helper
    buf = io.BytesIO()
    torch.onnx.export(m, tuple(ins), buf, export_params=True, **kw)
    init = {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(buf.getvalue()).graph.initializer}
    extra = []
    for i in onnx.load(path).graph.input[len(ins):]:
        if i.name not in init:
            sys.exit(f"{path}: graph input {i.name} has no initializer in the export with parameters")
        extra.append(init[i.name])
    return extra


def write(out, name, c, seed, persistent):
    m, ins, names = build(c, seed)
    path = os.path.join(out, name + ".onnx")
    extra = export(m, ins, names, path, params=c["weights"] == "const")
    with torch.no_grad():
        res = m(*ins)
    res = res if isinstance(res, tuple) else (res,)
    for i, a in enumerate([t.numpy() for t in ins] + extra):
        np.save(os.path.join(out, f"{name}.in{i}.npy"), np.ascontiguousarray(a))
    for i, r in enumerate(res):
        np.save(os.path.join(out, f"{name}.out{i}.npy"), r.numpy())
    return f"{name} {persistent}\n"


def configs():
    """(name, config, seed, persistent nodes expected): the matrix, with
    sizes drawn from one seeded generator."""
    rnd = random.Random(22)

    def sizes(big=False):
        return dict(inp=rnd.randint(3, 29), hid=rnd.randint(5, 40 if big else 24), steps=rnd.randint(3, 12),
                    out=rnd.randint(2, 7))

    base = dict(form="module", layers=1, bi=False, bf=False, init="zero", head=False, weights="const",
                lens=False, hn=False, manual=False, batch=1)
    rows = []

    def add(kind, persistent, **kw):
        c = dict(base, kind=kind, **sizes(kw.pop("big", False)))
        c.update(kw)
        tag = [kind, "loop" if c["form"] == "loop" else None, "manual" if c["manual"] else None,
               f"l{c['layers']}" if c["layers"] > 1 else None, "bi" if c["bi"] else None,
               "bf" if c["bf"] else None, "h0" if c["init"] == "given" else None, "head" if c["head"] else None,
               "win" if c["weights"] == "input" else None, "lens" if c["lens"] else None,
               f"b{c['batch']}" if c["batch"] > 1 else None]
        name = "_".join(t for t in tag if t)
        rows.append((name, c, 1000 + len(rows), persistent))

    for kind in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        add(kind, 1, big=True)                                   # the plain module
        add(kind, 1, head=True, hn=True, batch=rnd.randint(2, 4))
        add(kind, 1, layers=rnd.randint(2, 4), head=True)        # a stack: one node
        add(kind, 1, bi=True, head=True)                         # two directions, one node
        add(kind, 1, form="loop", head=True, batch=rnd.randint(1, 3))
    add("lstm", 1, bf=True, init="given", hn=True, batch=rnd.randint(2, 4))
    add("gru", 1, bf=True, init="given", batch=rnd.randint(2, 4))
    add("lstm", 1, weights="input", head=True)
    add("gru", 1, weights="input", layers=2)
    add("rnn_tanh", 1, weights="input", bf=True, batch=2)
    add("lstm", 1, lens=True, batch=3, hn=True)
    add("gru", 1, lens=True, batch=2)
    add("lstm", 2, layers=2, bi=True, head=True)                 # a node per layer
    add("lstm", 1, form="loop", manual=True, init="given", batch=2)
    add("gru", 1, form="loop", manual=True, batch=1, hn=True)
    add("rnn_tanh", 1, form="loop", bf=True, batch=2)
    add("gru", 1, form="loop", init="given", bf=True, batch=3)
    add("lstm", 1, layers=3, head=True, batch=rnd.randint(2, 4))  # a stack of a batch: one node
    add("gru", 1, bi=True, batch=rnd.randint(2, 4))              # two directions of a batch: one node
    add("rnn_tanh", 2, layers=2, bi=True, bf=True, batch=2)      # a pair per layer
    return rows


def bench(out):
    """The GPU benchmark's models (bench/gpu/lstm.sh): weights as
    constants, zero initial state, PyTorch's initialisation; NAME.onnx and
    NAME.in0.npy (and .out0.npy)."""
    os.makedirs(out, exist_ok=True)
    b = dict(form="module", bi=False, bf=False, init="zero", head=False, weights="const", lens=False, hn=False,
             manual=False, batch=1, out=1)
    for name, c in (("torch_lstm_80x256", dict(kind="lstm", inp=256, hid=256, steps=80, layers=1)),
                    ("torch_lstm_8x256x8l", dict(kind="lstm", inp=256, hid=256, steps=8, layers=8)),
                    ("torch_gru_80x256x2l", dict(kind="gru", inp=256, hid=256, steps=80, layers=2)),
                    ("torch_bilstm_80x256", dict(kind="lstm", inp=256, hid=256, steps=80, layers=1, bi=True))):
        write(out, name, dict(b, **c), 7, 1)
        print(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--bench", metavar="DIR")
    a = ap.parse_args()
    if a.bench:
        bench(a.bench)
        return
    rows = configs()
    if a.list:
        for name, c, seed, p in rows:
            print(name, p, c)
        return
    only = set(filter(None, a.only.split(",")))
    os.makedirs(a.out, exist_ok=True)
    manifest = []
    for name, c, seed, p in rows:
        if only and name not in only:
            continue
        manifest.append(write(a.out, name, c, seed, p))
        print(name, file=sys.stderr)
    if not only:
        with open(os.path.join(a.out, "MANIFEST"), "w") as f:
            f.write("# NAME PERSISTENT: the fusion nodes of kind persistent the pass leaves (tests/rnn/gen.py)\n")
            f.writelines(manifest)


if __name__ == "__main__":
    main()
