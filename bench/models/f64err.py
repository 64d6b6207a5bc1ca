#!/usr/bin/env python3
"""f64err.py DIR NAME OUTS: an f16 (or bf16) model's error against the truth, for
wild.sh: the relative L2 distance of kfuse's outputs (OUTS/out<i>.npy) and
of PyTorch's f16 outputs (DIR/NAME.out<i>.npy) from the same model in f64
(DIR/NAME.ref<i>.npy, wild.py), the worst output of each.  Prints
"f64 rel L2: kfuse K, torch T (R x)", or nothing without a reference."""
import os
import sys

import numpy as np

def load(path):
    """an .npy as f64; kfuse writes bf16 as raw '|V2' (numpy has no bf16)"""
    a = np.load(path)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)


d, name, outs = sys.argv[1:4]
k_worst = t_worst = 0.0
i = 0
while os.path.exists(f"{d}/{name}.ref{i}.npy") and os.path.exists(f"{outs}/out{i}.npy"):
    ref = load(f"{d}/{name}.ref{i}.npy")
    norm = np.linalg.norm(ref) or 1.0
    k = load(f"{outs}/out{i}.npy")
    t = load(f"{d}/{name}.out{i}.npy")
    if k.shape == ref.shape == t.shape:
        k_worst = max(k_worst, np.linalg.norm(k - ref) / norm)
        t_worst = max(t_worst, np.linalg.norm(t - ref) / norm)
    i += 1
if i:
    # both exact (a zero-initialised head gives zeros everywhere): level
    ratio = k_worst / t_worst if t_worst else (1.0 if k_worst == 0 else float("inf"))
    print(f"f64 rel L2: kfuse {k_worst:.3g}, torch {t_worst:.3g} ({ratio:.2f} x)")
