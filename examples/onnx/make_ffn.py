#!/usr/bin/env python3
"""Writes examples/onnx/ffn.onnx: a transformer feed-forward block as an
exporter writes it, with layer norm and GELU spelled out as primitive ops
(ReduceMean, Sub, Pow, Sqrt, Div, Erf, ...), fixed random weights.

The protobuf is encoded by hand (the onnx Python package is not a Debian
package); field numbers are those of onnx.proto.  Run it with any python3
with numpy: the output is deterministic."""
import struct, sys
import numpy as np

def varint(n):
    n &= (1 << 64) - 1  # negative ints are 64-bit two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def key(field, wire): return varint(field << 3 | wire)
def f_int(field, v): return key(field, 0) + varint(v)
def f_bytes(field, b): return key(field, 2) + varint(len(b)) + b
def f_str(field, s): return f_bytes(field, s.encode())
def f_float(field, v): return key(field, 5) + struct.pack("<f", v)

FLOAT, INT, INTS = 1, 2, 7  # AttributeProto.AttributeType

def attr_f(name, v): return f_str(1, name) + f_float(2, v) + f_int(20, FLOAT)
def attr_i(name, v): return f_str(1, name) + f_int(3, v) + f_int(20, INT)
def attr_ints(name, vs): return f_str(1, name) + b"".join(f_int(8, v) for v in vs) + f_int(20, INTS)

def node(op, ins, outs, *attrs):
    b = b"".join(f_str(1, i) for i in ins) + b"".join(f_str(2, o) for o in outs)
    b += f_str(3, outs[0] + "_node") + f_str(4, op)
    return b + b"".join(f_bytes(5, a) for a in attrs)

def tensor(name, arr):
    arr = np.asarray(arr, dtype="<f4").copy(order="C")  # keeps 0-d scalars 0-d
    b = b"".join(f_int(1, d) for d in arr.shape) + f_int(2, 1)  # FLOAT
    return b + f_str(8, name) + f_bytes(9, arr.tobytes())

def value_info(name, shape):
    dims = b"".join(f_bytes(1, f_int(1, d)) for d in shape)
    tt = f_int(1, 1) + f_bytes(2, dims)
    return f_str(1, name) + f_bytes(2, f_bytes(1, tt))

def main(path):
    T, D, F = 8, 64, 256
    rng = np.random.default_rng(2026)
    w = {
        "gamma": 1 + 0.1 * rng.standard_normal(D), "beta": 0.1 * rng.standard_normal(D),
        "w1": rng.standard_normal((D, F)) / np.sqrt(D), "b1": 0.1 * rng.standard_normal(F),
        "w2": rng.standard_normal((F, D)) / np.sqrt(F), "b2": 0.1 * rng.standard_normal(D),
        "eps": np.array(1e-5), "two": np.array(2.0), "sqrt2": np.array(np.sqrt(2.0)),
        "one": np.array(1.0), "half": np.array(0.5),
    }
    nodes = [
        # layer norm over the last axis, as PyTorch's exporter writes it without LayerNormalization
        node("ReduceMean", ["x"], ["mu"], attr_ints("axes", [-1])),
        node("Sub", ["x", "mu"], ["xc"]),
        node("Pow", ["xc", "two"], ["sq"]),
        node("ReduceMean", ["sq"], ["var"], attr_ints("axes", [-1])),
        node("Add", ["var", "eps"], ["ve"]),
        node("Sqrt", ["ve"], ["sd"]),
        node("Div", ["xc", "sd"], ["xn"]),
        node("Mul", ["xn", "gamma"], ["xg"]),
        node("Add", ["xg", "beta"], ["ln"]),
        # up projection, GELU in its erf form, down projection, residual
        node("MatMul", ["ln", "w1"], ["h0"]),
        node("Add", ["h0", "b1"], ["h"]),
        node("Div", ["h", "sqrt2"], ["hs"]),
        node("Erf", ["hs"], ["he"]),
        node("Add", ["he", "one"], ["h1"]),
        node("Mul", ["h", "h1"], ["h2"]),
        node("Mul", ["h2", "half"], ["g"]),
        node("MatMul", ["g", "w2"], ["o0"]),
        node("Add", ["o0", "b2"], ["o1"]),
        node("Add", ["o1", "x"], ["y"]),
    ]
    graph = b"".join(f_bytes(1, n) for n in nodes) + f_str(2, "ffn")
    graph += b"".join(f_bytes(5, tensor(k, v)) for k, v in w.items())
    graph += f_bytes(11, value_info("x", [T, D])) + f_bytes(12, value_info("y", [T, D]))
    model = f_int(1, 8) + f_str(2, "kfuse-example") + f_bytes(7, graph)
    model += f_bytes(8, f_str(1, "") + f_int(2, 17))
    open(path, "wb").write(model)

main(sys.argv[1] if len(sys.argv) > 1 else "ffn.onnx")
