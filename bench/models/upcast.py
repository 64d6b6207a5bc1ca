#!/usr/bin/env python3
"""upcast.py IN.onnx OUT.onnx: an f16 or bf16 ONNX file with every low-precision
tensor made f32 (initializers, Constant values, Cast targets, declared
types), so that running OUT in f32 computes IN's own function with no
low-precision arithmetic: the values the exporter wrote are kept exactly
(f16 and bf16 both widen to f32 without rounding).

Why: when a model exported in f16 or bf16 is farther from the same model in
f64 than PyTorch's own f16/bf16 run (wild.sh's "f64 rel L2" column), this
separates the file's error (an exporter that folds batch norms into
low-precision weights rounds every folded weight; PyTorch's own run keeps
the norm apart, in f32) from kfuse's arithmetic: run OUT through kfuse in
f32 and measure it with f64err.py as wild.sh does.  Inputs stay as they are
(kfuse-run takes f32 .npy for an f32 input)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

LOW = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


def widen(t):
    """tensor t as f32 (exact), or None when it is not f16/bf16"""
    if t.data_type == TensorProto.FLOAT16:
        a = numpy_helper.to_array(t).astype(np.float32)
    elif t.data_type == TensorProto.BFLOAT16:
        # raw bf16 bits are the top half of an f32's
        if t.raw_data:
            bits = np.frombuffer(t.raw_data, dtype=np.uint16)
        else:  # int32_data holds one bf16 a value
            bits = np.array(t.int32_data, dtype=np.uint16)
        a = (bits.astype(np.uint32) << 16).view(np.float32).reshape(tuple(t.dims))
    else:
        return None
    return numpy_helper.from_array(a, t.name)


def upcast_graph(g):
    for i, t in enumerate(g.initializer):
        w = widen(t)
        if w is not None:
            g.initializer[i].CopyFrom(w)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.elem_type in LOW:
            tt.elem_type = TensorProto.FLOAT
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i in LOW:
                a.i = TensorProto.FLOAT
            elif a.type == onnx.AttributeProto.TENSOR:
                w = widen(a.t)
                if w is not None:
                    a.t.CopyFrom(w)
            elif a.type == onnx.AttributeProto.GRAPH:
                upcast_graph(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    upcast_graph(sg)
            elif a.type == onnx.AttributeProto.INT and a.name == "dtype" and a.i in LOW:
                # the output type of EyeLike, RandomNormal and the like
                a.i = TensorProto.FLOAT


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    m = onnx.load(sys.argv[1])
    upcast_graph(m.graph)
    onnx.save(m, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
