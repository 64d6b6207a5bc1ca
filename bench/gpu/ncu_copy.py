#!/usr/bin/env python3
"""A device copy for ncu (bench/gpu/ncu.sh): N f32 elements (argv[1]),
five launches, random data."""
import sys

import torch

n = int(sys.argv[1])
a = torch.randn(n, device="cuda")
b = torch.empty_like(a)
for _ in range(5):
    b.copy_(a)
torch.cuda.synchronize()
