#!/usr/bin/python3
"""The accuracy of TF32 contractions (kfuse-run --allow-tf32), measured on
the CPU: f32 inputs rounded to TF32 as the tensor cores take them (10
mantissa bits, round to nearest with ties away from zero: PTX cvt.rna.tf32.f32,
which kfuse's mma kernel uses; cuBLAS's FAST_TF32 kernels round alike),
products accumulated in f64 here (the tensor cores accumulate in f32, whose
error is the plain f32 column's), against the f64 product of the f32 inputs.

    /usr/bin/python3 bench/tf32_accuracy.py

Prints, per shape and input distribution, the error relative to the
largest result (max) and the median elementwise relative error, for
plain f32 (SGEMM) and for TF32.  docs/matmul.md ("TF32") quotes it.
"""
import numpy as np


def tf32(a):
    """Round f32 to TF32 (rna): keep 10 of 23 mantissa bits."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x1000) & 0xFFFFE000  # add half an ulp of the 13 dropped bits, ties away
    return u.astype(np.uint32).view(np.float32)


def errs(got, ref):
    d = np.abs(got.astype(np.float64) - ref)
    rel = d / np.maximum(np.abs(ref), 1e-30)
    return d.max() / np.abs(ref).max(), np.median(rel)


def main():
    rng = np.random.default_rng(0)
    shapes = [(64, 512, 512), (64, 1376, 512), (64, 512, 1376), (128, 768, 3072), (512, 1024, 4096)]
    print("%-18s %-8s %12s %12s %12s %12s" % ("M x N x K", "inputs", "f32 max", "f32 median",
                                               "tf32 max", "tf32 median"))
    for M, N, K in shapes:
        for dist in ("normal", "uniform"):
            if dist == "normal":
                a = rng.standard_normal((M, K)).astype(np.float32)
                b = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
            else:
                a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
                b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            f32 = a @ b  # numpy's f32 GEMM: f32 accumulation
            t = tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)
            fm, fmed = errs(f32, ref)
            tm, tmed = errs(t, ref)
            print("%-18s %-8s %12.2e %12.2e %12.2e %12.2e" % ("%dx%dx%d" % (M, N, K), dist, fm, fmed, tm, tmed))


if __name__ == "__main__":
    main()
