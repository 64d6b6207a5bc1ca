#!/usr/bin/env python3
"""make.py: the small ONNX models of the importer's golden tests
(tests/golden/onnx/*.kf), written with onnx.helper; run it with a python3
that has onnx (/usr/bin/python3 here) in this directory.  Deterministic."""
import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

here = os.path.dirname(os.path.abspath(__file__))


def model(name, nodes, inputs, outputs, inits=(), opset=17, value_info=()):
    g = h.make_graph(nodes, name, inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="make.py")
    return m


def save(m, name, **kw):
    onnx.save(m, os.path.join(here, name), **kw)


def vi(name, dt, shape):
    return h.make_tensor_value_info(name, dt, shape)


def const(name, arr):
    return nh.from_array(np.asarray(arr), name)


rng = np.random.default_rng(0)

# dynamic.onnx: a GPT-style view through Shape/Gather/Unsqueeze/Concat with
# dynamic batch and sequence, a [-1, E] flatten and back, and Range(0, T).
nodes = [
    h.make_node("Shape", ["x"], ["s"]),
    h.make_node("Gather", ["s", "i0"], ["b"], axis=0),
    h.make_node("Gather", ["s", "i1"], ["t"], axis=0),
    h.make_node("Unsqueeze", ["b", "ax0"], ["bu"]),
    h.make_node("Unsqueeze", ["t", "ax0"], ["tu"]),
    h.make_node("Concat", ["bu", "tu", "heads", "hd"], ["shape4"], axis=0),
    h.make_node("Reshape", ["x", "shape4"], ["x4"]),
    h.make_node("Transpose", ["x4"], ["xt"], perm=[0, 2, 1, 3]),
    h.make_node("Reshape", ["x", "flat"], ["x2"]),
    h.make_node("Relu", ["x2"], ["r2"]),
    h.make_node("Slice", ["s", "st0", "en2", "ax0"], ["bt"]),
    h.make_node("Concat", ["bt", "e8"], ["shape3"], axis=0),
    h.make_node("Reshape", ["r2", "shape3"], ["y"]),
    h.make_node("Range", ["zero", "t", "one"], ["pos"]),
]
inits = [const("i0", np.int64(0)), const("i1", np.int64(1)), const("ax0", np.array([0], np.int64)),
         const("heads", np.array([2], np.int64)), const("hd", np.array([4], np.int64)),
         const("flat", np.array([-1, 8], np.int64)), const("st0", np.array([0], np.int64)),
         const("en2", np.array([2], np.int64)), const("e8", np.array([8], np.int64)),
         const("zero", np.int64(0)), const("one", np.int64(1))]
save(model("dynamic", nodes, [vi("x", T.FLOAT, ["batch", "seq", 8])],
           [vi("xt", T.FLOAT, ["batch", 2, "seq", 4]), vi("y", T.FLOAT, ["batch", "seq", 8]),
            vi("pos", T.INT64, ["seq"])], inits), "dynamic.onnx")

# gather.onnx: the three forms: constant data and indices (folded), a
# constant index on a tensor (a slice), data-dependent indices (the op).
nodes = [
    h.make_node("Gather", ["table", "cidx"], ["folded"], axis=0),
    h.make_node("Gather", ["x", "k"], ["col"], axis=1),
    h.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
]
inits = [const("table", rng.standard_normal((10, 3)).astype(np.float32)),
         const("cidx", np.array([[0, 9], [-1, 2]], np.int64)), const("k", np.int64(-1))]
save(model("gather", nodes, [vi("x", T.FLOAT, [2, 5]), vi("ids", T.INT64, [4])],
           [vi("folded", T.FLOAT, [2, 2, 3]), vi("col", T.FLOAT, [2]), vi("emb", T.FLOAT, [4, 3])], inits),
     "gather.onnx")

# shape_input.onnx: Reshape's target shape is a graph input (as the node tests pass it).
save(model("shape_input", [h.make_node("Reshape", ["x", "shape"], ["y"])],
           [vi("x", T.FLOAT, [2, 3, 4]), vi("shape", T.INT64, [2])], [vi("y", T.FLOAT, [6, 4])]),
     "shape_input.onnx")
np.save(os.path.join(here, "shape_6_4.npy"), np.array([6, 4], np.int64))
np.save(os.path.join(here, "shape_f32.npy"), np.array([6, 4], np.float32))
np.save(os.path.join(here, "x234.npy"), np.arange(24, dtype=np.float32).reshape(2, 3, 4))

# unsupported.onnx: an op kfuse lacks (Tan) between two it has, its output
# type declared, with attributes of every kind a plugin might read.
nodes = [h.make_node("Relu", ["x"], ["r"]),
         h.make_node("Tan", ["r"], ["t"]),
         h.make_node("Sigmoid", ["t"], ["y"])]
save(model("unsupported", nodes, [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])],
           value_info=[vi("t", T.FLOAT, [4])]), "unsupported.onnx")
m = model("custom", [h.make_node("FusedThing", ["x"], ["y"], domain="com.example", alpha=0.5, k=3,
                                 mode="fast", dims=[1, 2], scales=[0.5, 2.0], names=["a", "b"])],
          [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])])
m.opset_import.append(h.make_opsetid("com.example", 1))
save(m, "custom.onnx")

# external.onnx: weights in external.data beside the model (onnx's own writer).
w = const("w", rng.standard_normal((16, 8)).astype(np.float32))
m = model("external", [h.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2, 16])],
          [vi("y", T.FLOAT, [2, 8])], [w])
onnx.save_model(m, os.path.join(here, "external.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                location="external.data", size_threshold=0)
np.save(os.path.join(here, "external_w.npy"), nh.to_array(w))
# ... and one whose external data points outside its directory
m = model("escape", [h.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2, 16])],
          [vi("y", T.FLOAT, [2, 8])], [const("w", np.zeros((16, 8), np.float32))])
ext = m.graph.initializer[0]
ext.ClearField("raw_data")
ext.data_location = T.EXTERNAL
for k, v in (("location", "../escape.data"), ("offset", "0"), ("length", "512")):
    e = ext.external_data.add()
    e.key, e.value = k, v
onnx.save(m, os.path.join(here, "escape.onnx"))

# gemm6.onnx: Gemm of opset 6, with its `broadcast` attribute.
save(model("gemm6", [h.make_node("Gemm", ["a", "b", "c"], ["y"], broadcast=1, transB=1, alpha=2.0)],
           [vi("a", T.FLOAT, [2, 3]), vi("b", T.FLOAT, [4, 3]), vi("c", T.FLOAT, [4])], [vi("y", T.FLOAT, [2, 4])],
           opset=6), "gemm6.onnx")
