#!/usr/bin/env python3
"""attention_check.py GOT.npy REF.npy: a kfuse output against PyTorch's
(numpy's allclose terms: |got - ref| <= 2e-3 + 2e-2 |ref|, NaN only where the
reference has NaN).  Prints one line, 'ok ...' or 'MISMATCH ...'; exit 0 either
way (1 when a file is missing or the shapes differ)."""
import sys

import numpy as np

try:
    got = np.load(sys.argv[1]).astype(np.float32)
    ref = np.load(sys.argv[2]).astype(np.float32)
except Exception as e:
    print(f"MISMATCH cannot read: {e}")
    sys.exit(1)
if got.shape != ref.shape:
    print(f"MISMATCH shape {got.shape} vs {ref.shape}")
    sys.exit(1)
d = np.abs(got - ref)
bad = ~(d <= 2e-3 + 2e-2 * np.abs(ref)) & ~(np.isnan(got) & np.isnan(ref))
n = int(bad.sum())
word = "ok" if n == 0 else "MISMATCH"
print(f"{word} max abs {np.nanmax(d):.3g}, {n} of {got.size} out of tolerance")
