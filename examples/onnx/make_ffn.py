#!/usr/bin/python3
"""Writes examples/onnx/ffn.onnx: a transformer feed-forward block as an
exporter writes it, with layer norm and GELU spelled out as primitive ops
(ReduceMean, Sub, Pow, Sqrt, Div, Erf, ...), fixed random weights.

Built with the onnx Python package (Debian: python3-onnx) and checked with
its checker; the output is deterministic, and tests/onnx (onnx/make-ffn)
checks that the committed ffn.onnx is exactly what this script writes.

    /usr/bin/python3 examples/onnx/make_ffn.py examples/onnx/ffn.onnx"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


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
    inits = [numpy_helper.from_array(np.asarray(v, dtype=np.float32), name=k) for k, v in w.items()]

    def node(op, ins, outs, **attrs):
        return helper.make_node(op, ins, outs, name=outs[0] + "_node", **attrs)

    nodes = [
        # layer norm over the last axis, as PyTorch's exporter writes it without LayerNormalization
        node("ReduceMean", ["x"], ["mu"], axes=[-1]),
        node("Sub", ["x", "mu"], ["xc"]),
        node("Pow", ["xc", "two"], ["sq"]),
        node("ReduceMean", ["sq"], ["var"], axes=[-1]),
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
    graph = helper.make_graph(
        nodes, "ffn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [T, D])],
        initializer=inits)
    # opset 17: ReduceMean still takes axes as an attribute
    model = helper.make_model(graph, producer_name="kfuse-example", ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


main(sys.argv[1] if len(sys.argv) > 1 else "ffn.onnx")
