#!/usr/bin/env python3
"""Graphs whose operands have different float types, as PyTorch exports
them and ONNX does not allow (one T): torch ran them, so kfuse takes them.

LayerNormalization with a scale and bias of another float type than x,
as PyTorch exports torch's mixed-type layer_norm (timm's ConvNeXt-V2 in f16:
its response norm casts the block to f32, so a later norm gets f32 x and f16
weights; ONNX asks for one type, so kfuse refused the model):

  x f32, scale and bias f16   -> y f32, computed in f32
  x f16, scale and bias f32   -> y f16, computed in f32, rounded once
  x f16, scale bf16, bias f16 -> y f16, computed in f32
and BatchNormalization of f16 x with f32 or f16 scale, bias, mean and
variance (ONNX's T, T1, T2; PyTorch's export under autocast or of
model.half()): y f16, computed in f32 and rounded once, as torch does.

Binary ops of two float types (a bf16 model's f32 mask added to its
scores, F.normalize's f32 eps in a bf16 max), promoted as torch promotes:

  Add(bf16[2,3], f32[2,3])       -> f32
  Max(bf16[2,3], f32[1] const)   -> bf16 (one element: a scalar, no widening)
  MatMul(f32[2,3], bf16[3,4])    -> f32
  Where(b, bf16[2,3], f32[2,3])  -> f32 (GPT-2's mask value beside bf16 scores)

Each graph is written with the onnx package, imported, run on the
interpreter and compared with numpy's layer norm in f64 of the same values,
rounded to y's type.

    mixed_types.py KFUSE_IMPORT_ONNX KFUSE_RUN WORKDIR
Exit 77 (skipped) where no onnx package is importable."""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("no onnx / numpy package: skipped")
    sys.exit(77)

imp, run, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(5)
ONNX_T = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
NP_T = {"f32": np.float32, "f16": np.float16}


def bf16_round(a):
    """a (f32) rounded to bf16 (to nearest even), as f32 values and raw bits."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return (u << 16).astype(np.uint32).view(np.float32), u.astype(np.uint16)


def init(name, vals, t):
    if t == "bf16":
        _, bits = bf16_round(vals)
        return helper.make_tensor(name, TensorProto.BFLOAT16, vals.shape, bits.tobytes(), raw=True)
    return numpy_helper.from_array(vals.astype(NP_T[t]), name)


def check(name, graph, opset, inputs, want, tol, result_type=None):
    """Writes the model, its inputs and the wanted output, imports it (its
    result of result_type when given) and runs it on the interpreter
    against want within tol; 1 on a failure (printed), else 0."""
    path = os.path.join(work, name)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path + ".onnx")
    args = []
    for k, v in enumerate(inputs):
        np.save(f"{path}.in{k}.npy", v)
        args += ["--input", f"{k}={path}.in{k}.npy"]
    np.save(path + ".want.npy", want)
    r = subprocess.run([imp, path + ".onnx", "-o", path + ".kf"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL {name}: import: {r.stderr.strip()}")
        return 1
    with open(path + ".kf") as f:
        got_t = f.readline().split("->")[1]
    if result_type and result_type not in got_t:
        print(f"FAIL {name}: the result is not {result_type}: {got_t.strip()}")
        return 1
    r = subprocess.run([run, path + ".kf"] + args + ["--expect", "0=" + path + ".want.npy"] + tol,
                       capture_output=True, text=True)
    line = [ln for ln in r.stdout.splitlines() + r.stderr.splitlines() if ln.startswith("expect")]
    print(f"{'ok' if r.returncode == 0 else 'FAIL'} {name}: {line[0] if line else r.stderr.strip()}")
    return int(r.returncode != 0)


fails = 0
for xt, st, bt in [("f32", "f16", "f16"), ("f16", "f32", "f32"), ("f16", "bf16", "f16")]:
    name = f"ln_{xt}_{st}_{bt}"
    x = rng.standard_normal((2, 3, 8)).astype(np.float32) * 3 + 1
    s = rng.standard_normal(8).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    # the values each operand holds in its type
    xv = x.astype(NP_T[xt]).astype(np.float64)
    sv = (bf16_round(s)[0] if st == "bf16" else s.astype(NP_T[st])).astype(np.float64)
    bv = (bf16_round(b)[0] if bt == "bf16" else b.astype(NP_T[bt])).astype(np.float64)
    mu = xv.mean(-1, keepdims=True)
    var = ((xv - mu) ** 2).mean(-1, keepdims=True)
    want = ((xv - mu) / np.sqrt(var + 1e-5) * sv + bv).astype(NP_T[xt])
    g = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)], name,
        [helper.make_tensor_value_info("x", ONNX_T[xt], [2, 3, 8])],
        [helper.make_tensor_value_info("y", ONNX_T[xt], [2, 3, 8])],
        [init("s", s, st), init("b", b, bt)])
    # one rounding of y's type apart at most (f16: 2^-11 relative)
    tol = ["--rtol", "1e-3", "--atol", "1e-3"] if xt == "f16" else ["--rtol", "1e-5", "--atol", "1e-5"]
    fails += check(name, g, 17, [x.astype(NP_T[xt])], want, tol)

# BatchNormalization of f16 x, its parameters f32 (T1, T2: an export under
# autocast) or f16 (model.half()): computed in f32 and rounded once, as
# torch's kernels compute it; an import that rounds each op (x - mean, the
# product, the sum) or the per-channel factor to f16 is several ulps off
for pt in ["f32", "f16"]:
    name = f"bn_f16_{pt}"
    x = (rng.standard_normal((2, 3, 8, 8)) * 2 + 0.5).astype(np.float16)
    ps = [rng.standard_normal(3) for _ in range(3)] + [rng.uniform(0.5, 2, 3)]
    ps = [p.astype(NP_T[pt]) for p in ps]
    sc, bi, mean, var = (p.astype(np.float64).reshape(1, 3, 1, 1) for p in ps)
    want = ((x.astype(np.float64) - mean) / np.sqrt(var + 1e-5) * sc + bi).astype(np.float16)
    g = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-5)], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3, 8, 8])],
        [numpy_helper.from_array(p, n) for p, n in zip(ps, "sbmv")])
    # one f16 rounding apart at most (f32's own error is far below it)
    fails += check(name, g, 15, [x], want, ["--rtol", "1e-3", "--atol", "1e-4"])

# BatchNormalization in training mode on f16 x (timm's weight-standardised
# convs, StdConv2d in NF-ResNets and BiT: F.batch_norm(training=True) on the
# f16 weight reshaped to [1, O, fan-in]): the batch's mean and variance are
# computed in f32 from x's values, as torch computes them; statistics rounded
# to f16 (a mean near 1 is 2^-11 off, a twentieth of a 0.01 deviation) shift
# whole channels.  Values as a conv weight's: a mean far from 0 beside a small
# spread.
for pt in ["f32", "f16"]:
    name = f"bn_train_f16_{pt}"
    x = (1 + rng.standard_normal((1, 4, 72)) * 0.01).astype(np.float16)
    ps = [p.astype(NP_T[pt]) for p in [rng.uniform(0.5, 2, 4), rng.standard_normal(4)]]
    sc, bi = (p.astype(np.float64).reshape(1, 4, 1) for p in ps)
    xv = x.astype(np.float64)
    mu = xv.mean((0, 2), keepdims=True)
    var = ((xv - mu) ** 2).mean((0, 2), keepdims=True)
    want = ((xv - mu) / np.sqrt(var + 1e-5) * sc + bi).astype(np.float16)
    rm, rv = np.zeros(4, NP_T[pt]), np.ones(4, NP_T[pt])
    g = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "rm", "rv"], ["y"], epsilon=1e-5, training_mode=1,
                          momentum=0.0)], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4, 72])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 4, 72])],
        [numpy_helper.from_array(ps[0], "s"), numpy_helper.from_array(ps[1], "b"),
         numpy_helper.from_array(rm, "rm"), numpy_helper.from_array(rv, "rv")])
    fails += check(name, g, 15, [x], want, ["--rtol", "2e-3", "--atol", "2e-3"])

# InstanceNormalization (PyTorch's GroupNorm and InstanceNorm export) of f16
# x: in f32, y rounded once, as torch computes it
name = "in_f16"
x = (1 + rng.standard_normal((2, 3, 6, 6)) * 0.01).astype(np.float16)
ps = [rng.uniform(0.5, 2, 3).astype(np.float16), rng.standard_normal(3).astype(np.float16)]
sc, bi = (p.astype(np.float64).reshape(1, 3, 1, 1) for p in ps)
xv = x.astype(np.float64)
mu = xv.mean((2, 3), keepdims=True)
var = ((xv - mu) ** 2).mean((2, 3), keepdims=True)
want = ((xv - mu) / np.sqrt(var + 1e-5) * sc + bi).astype(np.float16)
g = helper.make_graph(
    [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)], name,
    [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3, 6, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3, 6, 6])],
    [numpy_helper.from_array(ps[0], "s"), numpy_helper.from_array(ps[1], "b")])
fails += check(name, g, 15, [x], want, ["--rtol", "2e-3", "--atol", "2e-3"])

# ReduceL2 (torch.norm, F.normalize), ReduceL1 and ReduceLogSumExp of f16 x:
# in f32, rounded once, as torch computes them; the squares of values near
# 12 summed over 512 overflow f16 (the norm, 270, does not)
for op, fn in [("ReduceL2", lambda v: np.sqrt((v * v).sum(-1))), ("ReduceL1", lambda v: np.abs(v).sum(-1)),
               ("ReduceLogSumExp", lambda v: np.log(np.exp(v - v.max(-1, keepdims=True)).sum(-1)) + v.max(-1))]:
    name = op.lower() + "_f16"
    x = (12 + rng.standard_normal((2, 512))).astype(np.float16)
    want = fn(x.astype(np.float64)).astype(np.float16)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], axes=[-1], keepdims=0)], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])])
    fails += check(name, g, 13, [x], want, ["--rtol", "1e-3", "--atol", "0"])

# Softplus past exp's range (f16 from 11.1, f32 from 88.7): the value, not
# infinity (torch's softplus is x there)
for t, hi in [("f16", 30), ("f32", 200)]:
    name = "softplus_" + t
    x = np.linspace(-hi, hi, 64).astype(NP_T[t])
    v = x.astype(np.float64)
    want = (np.maximum(v, 0) + np.log1p(np.exp(-np.abs(v)))).astype(NP_T[t])
    g = helper.make_graph([helper.make_node("Softplus", ["x"], ["y"])], name,
                          [helper.make_tensor_value_info("x", ONNX_T[t], [64])],
                          [helper.make_tensor_value_info("y", ONNX_T[t], [64])])
    fails += check(name, g, 13, [x], want, ["--rtol", "2e-3", "--atol", "1e-3"])

# binary ops of two float types; bf16 inputs given as f32 files (kfuse-run
# rounds them: numpy has no bf16)
def bf(a):
    return bf16_round(a)[0].astype(np.float64)


cases = [
    ("add_bf16_f32", "Add", [("x", "bf16", (2, 3)), ("y", "f32", (2, 3))], None, "f32", lambda x, y: x + y),
    ("max_bf16_f32c", "Max", [("x", "bf16", (2, 3))], ("c", np.array([0.25], np.float32)), "bf16", np.maximum),
    ("matmul_f32_bf16", "MatMul", [("x", "f32", (2, 3)), ("y", "bf16", (3, 4))], None, "f32", lambda x, y: x @ y),
    ("where_bf16_f32", "Where", [("x", "bf16", (2, 3)), ("y", "f32", (2, 3))],
     ("c", np.array([[True, False, True], [False, True, False]])), "f32", lambda x, y, c: np.where(c, x, y),
     ["c", "x", "y"]),
]
for name, op, ins, const, yt, fn, *order in cases:
    vals = [rng.standard_normal(shp).astype(np.float32) for _, _, shp in ins]
    exact = [bf(v) if t == "bf16" else v.astype(np.float64) for v, (_, t, _) in zip(vals, ins)]
    inits, names = [], [n for n, _, _ in ins]
    if const is not None:
        inits.append(numpy_helper.from_array(const[1], const[0]))
        names.append(const[0])
        exact.append(const[1].astype(np.float64))
    want = fn(*exact)
    want = bf16_round(want.astype(np.float32))[0] if yt == "bf16" else want.astype(np.float32)
    shape = list(want.shape)
    g = helper.make_graph([helper.make_node(op, order[0] if order else names, ["out"])], name,
                          [helper.make_tensor_value_info(n, ONNX_T[t], list(shp)) for n, t, shp in ins],
                          [helper.make_tensor_value_info("out", ONNX_T[yt], shape)], inits)
    fails += check(name, g, 17, vals, want, ["--rtol", "1e-5", "--atol", "1e-6"], yt)
sys.exit(1 if fails else 0)
