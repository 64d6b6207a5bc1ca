#!/usr/bin/env python3
"""lstm_inputs.py GRAPH.kf OUTDIR [--seed N]: inputs for an RNN graph of
examples/rnn/ (gen_rnn.py) as OUTDIR/NAME.npy, and the matching
`--input NAME=FILE` arguments on stdout, one line.

Why not `kfuse-run --random-inputs`: it draws every float from N(0, 1),
and with recurrent weights of that size (PyTorch uses U(-1/sqrt(H),
1/sqrt(H))) the pre-activations are ~N(0, H), so the recurrence is
chaotic: one ulp of difference in a dot product's summation order grows to
O(1) within a few dozen steps, and any two correct implementations (the
GPU's and the interpreter's, or the interpreter on inputs that differ by
one ulp) disagree (docs/persistent.md).  Here weights and biases are
U(-k, k) with k = 1/sqrt(H) as in torch.nn.LSTM/GRU, x and the initial
states U(-1, 1): the recurrence contracts and rounding stays rounding.

Standard library only (no numpy), so it runs wherever python3 does.
"""
import argparse
import os
import random
import re
import struct
import sys


def npy(path, shape, vals):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0])
    pad = 64 - (10 + len(hdr) + 1) % 64
    hdr = hdr + " " * (pad % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1"))
        f.write(struct.pack("<%df" % len(vals), *vals))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    text = open(a.graph).read()
    m = re.search(r"graph @\w+\((.*?)\)\s*->", text, re.S)
    if not m:
        sys.exit("lstm_inputs.py: %s: no graph header" % a.graph)
    params = re.findall(r"%(\w+): f32\[([0-9, ]*)\]", m.group(1))
    hid = [int(d) for n, dims in params if n.startswith("h0") for d in dims.split(",")][-1:]
    if not hid:
        sys.exit("lstm_inputs.py: %s: no %%h0 parameter (not a gen_rnn.py graph?)" % a.graph)
    k = 1.0 / hid[0] ** 0.5
    rng = random.Random(a.seed)
    os.makedirs(a.outdir, exist_ok=True)
    args = []
    for name, dims in params:
        shape = [int(d) for d in dims.split(",") if d.strip()]
        n = 1
        for d in shape:
            n *= d
        lim = k if name.startswith(("w_", "b")) else 1.0
        vals = [rng.uniform(-lim, lim) for _ in range(n)]
        path = os.path.join(a.outdir, name + ".npy")
        npy(path, shape, vals)
        args.append("--input %s=%s" % (name, path))
    print(" ".join(args))


if __name__ == "__main__":
    main()
