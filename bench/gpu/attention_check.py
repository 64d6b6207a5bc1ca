#!/usr/bin/env python3
"""attention_check.py GOT.npy REF.npy: a kfuse output against PyTorch's
(numpy's allclose terms: |got - ref| <= 2e-3 + 2e-2 |ref| (bf16: 1e-2 +
4e-2 |ref|, its 8 bits of mantissa), NaN only where the
reference has NaN).  Prints one line, 'ok ...' or 'MISMATCH ...'; exit 0 either
way (1 when a file is missing or the shapes differ)."""
import sys

import numpy as np


def load(f):
    """(f's array as f32, whether it is bf16): bf16 (2-byte voids) through
    its bits."""
    a = np.load(f)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32), True
    return a.astype(np.float32), False


try:
    got, _ = load(sys.argv[1])
    ref, bf = load(sys.argv[2])
except Exception as e:
    print(f"MISMATCH cannot read: {e}")
    sys.exit(1)
if got.shape != ref.shape:
    print(f"MISMATCH shape {got.shape} vs {ref.shape}")
    sys.exit(1)
d = np.abs(got - ref)
bad = ~(d <= (1e-2 if bf else 2e-3) + (4e-2 if bf else 2e-2) * np.abs(ref)) & ~(np.isnan(got) & np.isnan(ref))
n = int(bad.sum())
word = "ok" if n == 0 else "MISMATCH"
print(f"{word} max abs {np.nanmax(d):.3g}, {n} of {got.size} out of tolerance")
