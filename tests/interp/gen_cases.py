#!/usr/bin/python3
"""Writes the interpreter's numpy-checked cases into tests/interp/cases/.

Each case NAME is NAME.kf (one graph), NAME.in<i>.npy (its inputs in order)
and NAME.out<i>.npy (what numpy computes, in float64 and then rounded to the
output dtype).  tests/unit/test_interp.c runs every case listed there.
Run it again after changing a case: ./tests/interp/gen_cases.py
"""
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases")
rng = np.random.default_rng(1234)
erf = np.vectorize(math.erf)


def normal(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def case(name, kf, ins, outs):
    with open(os.path.join(OUT, name + ".kf"), "w") as f:
        f.write(kf.strip() + "\n")
    for i, a in enumerate(ins):
        np.save(os.path.join(OUT, f"{name}.in{i}.npy"), a)
    for i, a in enumerate(outs):
        np.save(os.path.join(OUT, f"{name}.out{i}.npy"), a)


def f64(a):
    return np.asarray(a, dtype=np.float64)


def gelu(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def main():
    os.makedirs(OUT, exist_ok=True)
    a, b = normal(2, 1, 3), normal(4, 1)
    case("bcast_add", """
graph @g(%a: f32[2,1,3], %b: f32[4,1]) -> (f32[2,4,3]) {
  %0 = add(%a, %b) : f32[2,4,3]
  return %0
}""", [a, b], [(f64(a) + b).astype(np.float32)])

    x, y, s = normal(3, 1), normal(1, 4), np.array(1.5, np.float32)
    case("arith_bcast", """
graph @g(%x: f32[3,1], %y: f32[1,4], %s: f32[]) -> (f32[3,4], f32[3,4], f32[3,4], f32[3,4]) {
  %0 = sub(%x, %y) : f32[3,4]
  %1 = div(%x, %y) : f32[3,4]
  %2 = mul(%y, %s) : f32[1,4]
  %3 = mul(%0, %2) : f32[3,4]
  %a = abs(%x) : f32[3,1]
  %4 = pow(%a, %y) : f32[3,4]
  return %0, %1, %3, %4
}""", [x, y, s], [(f64(x) - y).astype(np.float32), (f64(x) / y).astype(np.float32),
                  ((f64(x) - y) * (f64(y) * 1.5)).astype(np.float32),
                  np.power(np.abs(f64(x)), f64(y)).astype(np.float32)])

    nan, inf = np.nan, np.inf
    p = np.array([1, nan, -inf, 2, 0, inf], np.float32)
    q = np.array([nan, 3, 5, -inf, -0.5, inf], np.float32)
    case("max_min_nan", """
graph @g(%p: f32[6], %q: f32[6]) -> (f32[6], f32[6], f32[6], f32[6]) {
  %0 = max(%p, %q) : f32[6]
  %1 = min(%p, %q) : f32[6]
  %2 = add(%p, %q) : f32[6]
  %3 = mul(%p, %q) : f32[6]
  return %0, %1, %2, %3
}""", [p, q], [np.maximum(p, q), np.minimum(p, q), p + q, p * q])

    u = np.concatenate([normal(20) * 3, np.array([0, -1, 30, -30, inf, -inf, nan], np.float32)])
    v = f64(u)
    with np.errstate(all="ignore"):
        want = [-v, np.abs(v), np.exp(v), np.log(v), np.sqrt(v), 1 / np.sqrt(v), np.tanh(v),
                1 / (1 + np.exp(-v)), np.where(np.isnan(v), nan, np.maximum(v, 0)), gelu(v), gelu_tanh(v), erf(v),
                v / (1 + np.exp(-v))]
    names = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
             "gelu", "gelu", "erf", "silu"]
    body = []
    for i, op in enumerate(names):
        attr = ' {approximate = "tanh"}' if i == 10 else ""
        body.append(f"  %{i} = {op}(%u){attr} : f32[27]")
    ret = ", ".join(f"%{i}" for i in range(len(names)))
    case("unary_f32", f"""
graph @g(%u: f32[27]) -> ({", ".join(["f32[27]"] * len(names))}) {{
{chr(10).join(body)}
  return {ret}
}}""", [u], [w.astype(np.float32) for w in want])

    h = (normal(5, 7) * 4).astype(np.float16)
    k = normal(7).astype(np.float16)
    hf, kf = h.astype(np.float32), k.astype(np.float32)
    case("f16_ops", """
graph @g(%h: f16[5,7], %k: f16[7]) -> (f16[5,7], f16[5,7], f16[5,1], f32[5,7]) {
  %0 = add(%h, %k) : f16[5,7]
  %1 = exp(%k) : f16[7]
  %2 = mul(%h, %1) : f16[5,7]
  %3 = reduce_sum(%h) {axes = [1]} : f16[5,1]
  %4 = cast(%2) {to = "f32"} : f32[5,7]
  return %0, %2, %3, %4
}""", [h, k], [(hf + kf).astype(np.float16),
               (hf * np.exp(kf).astype(np.float16).astype(np.float32)).astype(np.float16),
               f64(h).sum(axis=1, keepdims=True).astype(np.float16),
               (hf * np.exp(kf).astype(np.float16).astype(np.float32)).astype(np.float16).astype(np.float32)])

    d = rng.standard_normal((3, 4))
    case("f64_ops", """
graph @g(%d: f64[3,4]) -> (f64[3,4], f64[3], f64[3,4]) {
  %0 = tanh(%d) : f64[3,4]
  %1 = reduce_mean(%d) {axes = [-1], keepdims = false} : f64[3]
  %2 = softmax(%d) : f64[3,4]
  return %0, %1, %2
}""", [d], [np.tanh(d), d.mean(axis=-1), np.exp(d - d.max(-1, keepdims=True)) /
            np.exp(d - d.max(-1, keepdims=True)).sum(-1, keepdims=True)])

    m = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    r = np.array([[10, 20], [30, 40], [50, 60]], np.float32)
    c = np.array([1, -1], np.float32)
    case("gemm", """
graph @g(%m: f32[2,3], %r: f32[3,2], %c: f32[2]) -> (f32[2,2], f32[3,3], f32[2,2]) {
  %0 = gemm(%m, %r, %c) {alpha = 0.5, beta = 2.0} : f32[2,2]
  %1 = gemm(%m, %m) {trans_a = 1} : f32[3,3]
  %3 = gemm(%r, %m) {trans_a = true, trans_b = 1} : f32[2,2]
  return %0, %1, %3
}""",
         [m, r, c], [(0.5 * f64(m) @ r + 2 * f64(c)).astype(np.float32),
                     (f64(m).T @ m).astype(np.float32), (f64(r).T @ f64(m).T).astype(np.float32)])

    A, B = normal(2, 1, 3, 4), normal(5, 4, 2)
    v4, w42 = normal(4), normal(4, 2)
    case("matmul", """
graph @g(%A: f32[2,1,3,4], %B: f32[5,4,2], %v: f32[4], %w: f32[4,2]) -> (f32[2,5,3,2], f32[2], f32[3], f32[]) {
  %0 = matmul(%A, %B) : f32[2,5,3,2]
  %1 = matmul(%v, %w) : f32[2]
  %t = slice(%A) {starts = [0, 0], ends = [1, 1], axes = [0, 1]} : f32[1,1,3,4]
  %m = reshape(%t) {shape = [3, 4]} : f32[3,4]
  %2 = matmul(%m, %v) : f32[3]
  %3 = matmul(%v, %v) : f32[]
  return %0, %1, %2, %3
}""", [A, B, v4, w42], [(f64(A) @ f64(B)).astype(np.float32), (f64(v4) @ w42).astype(np.float32),
                        (f64(A[0, 0]) @ v4).astype(np.float32), np.float32(f64(v4) @ v4)])

    X = normal(2, 3, 4)
    case("reduce", """
graph @g(%x: f32[2,3,4]) -> (f32[2,1,4], f32[3], f32[1,1,1], f32[2,4], f32[2,3,1]) {
  %0 = reduce_sum(%x) {axes = [1]} : f32[2,1,4]
  %1 = reduce_mean(%x) {axes = [0, 2], keepdims = false} : f32[3]
  %2 = reduce_max(%x) : f32[1,1,1]
  %3 = reduce_min(%x) {axes = [-2], keepdims = 0} : f32[2,4]
  %4 = reduce_max(%x) {axes = [2]} : f32[2,3,1]
  return %0, %1, %2, %3, %4
}""", [X], [f64(X).sum(1, keepdims=True).astype(np.float32), f64(X).mean((0, 2)).astype(np.float32),
            X.max(keepdims=True), X.min(-2), X.max(2, keepdims=True)])

    S = normal(3, 4, 5)
    def softmax(a, ax):
        e = np.exp(a - a.max(ax, keepdims=True))
        return e / e.sum(ax, keepdims=True)
    case("softmax", """
graph @g(%s: f32[3,4,5]) -> (f32[3,4,5], f32[3,4,5], f32[3,4,5]) {
  %0 = softmax(%s) : f32[3,4,5]
  %1 = softmax(%s) {axis = 1} : f32[3,4,5]
  %2 = log_softmax(%s) {axis = 0} : f32[3,4,5]
  return %0, %1, %2
}""", [S], [softmax(f64(S), -1).astype(np.float32), softmax(f64(S), 1).astype(np.float32),
            np.log(softmax(f64(S), 0)).astype(np.float32)])

    L, sc, bi = normal(2, 3, 4), normal(3, 4), normal(3, 4)
    def lnorm(a, axes):
        mu = a.mean(axes, keepdims=True)
        var = ((a - mu) ** 2).mean(axes, keepdims=True)
        return (a - mu) / np.sqrt(var + 1e-5)
    case("layer_norm", """
graph @g(%x: f32[2,3,4], %s: f32[3,4], %b: f32[3,4]) -> (f32[2,3,4], f32[2,3,4]) {
  %0 = layer_norm(%x, %s, %b) {axis = -2} : f32[2,3,4]
  %1 = layer_norm(%x) {epsilon = 0.1} : f32[2,3,4]
  return %0, %1
}""", [L, sc, bi], [(lnorm(f64(L), (1, 2)) * sc + bi).astype(np.float32),
                    ((f64(L) - f64(L).mean(-1, keepdims=True)) /
                     np.sqrt(f64(L).var(-1, keepdims=True) + 0.1)).astype(np.float32)])

    T = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    case("shape_ops", """
graph @g(%t: f32[2,3,4]) -> (f32[4,2,3], f32[2,12], f32[3,2,3,4], f32[2,3,9], f32[2,1,2], f32[1,3,4], f32[1,3,4]) {
  %0 = transpose(%t) {perm = [2, 0, 1]} : f32[4,2,3]
  %1 = reshape(%t) {shape = [0, -1]} : f32[2,12]
  %2 = broadcast_to(%t) {shape = [3, 2, 3, 4]} : f32[3,2,3,4]
  %p = slice(%t) {starts = [1], ends = [2], axes = [2]} : f32[2,3,1]
  %3 = concat(%t, %p, %t) {axis = -1} : f32[2,3,9]
  %4 = slice(%t) {starts = [-1, 100, 3], ends = [-100, 0, -100], steps = [-1, -2, -2]} : f32[2,1,2]
  %s:2 = split(%t) {axis = 0} : f32[1,3,4], f32[1,3,4]
  return %0, %1, %2, %3, %4, %s#0, %s#1
}""", [T], [T.transpose(2, 0, 1), T.reshape(2, 12), np.broadcast_to(T, (3, 2, 3, 4)),
            np.concatenate([T, T[:, :, 1:2], T], -1), T[-1:-100:-1, 100:0:-2, 3:-100:-2], T[0:1], T[1:2]])

    case("split_sizes", """
graph @g(%t: f32[2,3,4]) -> (f32[2,3,1], f32[2,3,3], f32[2,3,0]) {
  %s:3 = split(%t) {axis = 2, sizes = [1, 3, 0]} : f32[2,3,1], f32[2,3,3], f32[2,3,0]
  return %s#0, %s#1, %s#2
}""", [T], [T[:, :, :1], T[:, :, 1:], T[:, :, 4:]])

    i32a = np.array([7, -7, 5, -2147483648, 100, 0, 3], np.int32)
    i32b = np.array([2, 2, 0, -1, -3, 0, -2], np.int32)
    tdiv = np.array([3, -3, 0, -2147483648, -33, 0, -1], np.int32)
    ipow = np.array([49, 49, 1, 0, 0, 1, 0], np.int32)
    with np.errstate(over="ignore"):
        case("int_ops", """
graph @g(%a: i32[7], %b: i32[7]) -> (i32[7], i32[7], i32[7], i32[7], i32[7], i32[7], i32[7]) {
  %0 = div(%a, %b) : i32[7]
  %1 = add(%a, %b) : i32[7]
  %2 = mul(%a, %a) : i32[7]
  %3 = neg(%a) : i32[7]
  %4 = abs(%a) : i32[7]
  %5 = pow(%a, %b) : i32[7]
  %6 = max(%a, %b) : i32[7]
  return %0, %1, %2, %3, %4, %5, %6
}""", [i32a, i32b], [tdiv, i32a + i32b, i32a * i32a, -i32a, np.abs(i32a), ipow, np.maximum(i32a, i32b)])

    i8 = np.array([127, -128, 100, -100], np.int8)
    with np.errstate(over="ignore"):
        case("int8_wrap", """
graph @g(%a: i8[4]) -> (i8[4], i8[1], i64[4]) {
  %0 = add(%a, %a) : i8[4]
  %1 = reduce_sum(%a) : i8[1]
  %2 = cast(%a) {to = "i64"} : i64[4]
  return %0, %1, %2
}""", [i8], [i8 + i8, np.array([i8.astype(np.int64).sum()]).astype(np.int8), i8.astype(np.int64)])

    cf = np.array([1.5, -1.5, 3e9, -3e9, nan, inf, 0.0, 2.5], np.float32)
    ci = np.array([300, -129, 2**40, -1], np.int64)
    case("cast", """
graph @g(%f: f32[8], %i: i64[4]) -> (i32[8], i8[8], i1[8], f16[8], i8[4], f32[4], f64[8]) {
  %0 = cast(%f) {to = "i32"} : i32[8]
  %1 = cast(%f) {to = "i8"} : i8[8]
  %2 = cast(%f) {to = "i1"} : i1[8]
  %3 = cast(%f) {to = "f16"} : f16[8]
  %4 = cast(%i) {to = "i8"} : i8[4]
  %5 = cast(%i) {to = "f32"} : f32[4]
  %6 = cast(%f) {to = "f64"} : f64[8]
  return %0, %1, %2, %3, %4, %5, %6
}""", [cf, ci], [np.array([1, -1, 2147483647, -2147483648, 0, 2147483647, 0, 2], np.int32),
                 np.array([1, -1, 127, -128, 0, 127, 0, 2], np.int8), cf != 0, cf.astype(np.float16),
                 np.array([44, 127, 0, -1], np.int8), ci.astype(np.float32), cf.astype(np.float64)])

    e1, e2 = np.array([1, nan, 3, -inf], np.float32), np.array([[1], [3]], np.float32)
    case("compare_logic", """
graph @g(%a: f32[4], %b: f32[2,1], %x: f32[2,4]) -> (i1[2,4], i1[2,4], i1[2,4], i1[2,4], i1[2,4], f32[2,4]) {
  %0 = eq(%a, %b) : i1[2,4]
  %1 = ne(%a, %b) : i1[2,4]
  %2 = lt(%a, %b) : i1[2,4]
  %3 = ge(%a, %b) : i1[2,4]
  %n = not(%2) : i1[2,4]
  %4 = and(%n, %3) : i1[2,4]
  %5 = or(%0, %2) : i1[2,4]
  %6 = where(%2, %x, %b) : f32[2,4]
  return %0, %1, %4, %5, %n, %6
}""", [e1, e2, normal(2, 4)], [])
    xa = np.load(os.path.join(OUT, "compare_logic.in2.npy"))
    lt = e1 < e2
    for i, w in enumerate([e1 == e2, e1 != e2, ~lt & (e1 >= e2), (e1 == e2) | lt, ~lt,
                           np.where(lt, xa, np.broadcast_to(e2, (2, 4)))]):
        np.save(os.path.join(OUT, f"compare_logic.out{i}.npy"), np.ascontiguousarray(w))

    z = np.zeros((0, 3), np.float32)
    zb = normal(3)
    case("empty", """
graph @g(%z: f32[0,3], %b: f32[3]) -> (f32[0,3], f32[3], f32[1,3], f32[3,3], f32[0,3], f32[3], f32[3]) {
  %0 = add(%z, %b) : f32[0,3]
  %1 = reduce_sum(%z) {axes = [0], keepdims = false} : f32[3]
  %2 = reduce_max(%z) {axes = [0]} : f32[1,3]
  %t = transpose(%z) : f32[3,0]
  %3 = matmul(%t, %z) : f32[3,3]
  %4 = softmax(%z) {axis = 0} : f32[0,3]
  %c = concat(%z, %z) {axis = 0} : f32[0,3]
  %r = reduce_mean(%c) {axes = [0], keepdims = false} : f32[3]
  %5 = add(%r, %b) : f32[3]
  %6 = reduce_min(%z) {axes = [0], keepdims = false} : f32[3]
  return %0, %1, %2, %3, %4, %5, %6
}""", [z, zb], [z, np.zeros(3, np.float32), np.full((1, 3), -inf, np.float32), np.zeros((3, 3), np.float32),
                z, np.full(3, nan, np.float32), np.full(3, inf, np.float32)])

    fx, fb = normal(4, 6), normal(6)
    case("fusion", """
graph @g(%x: f32[4,6], %b: f32[6]) -> (f32[4,6], f32[4]) {
  %f:2 = fusion @k0(%x, %b) {kind = "elementwise"} : f32[4,6], f32[4] {
  ^(%p0: f32[4,6], %p1: f32[6]):
    %t = add(%p0, %p1) : f32[4,6]
    %g = gelu(%t) {approximate = "tanh"} : f32[4,6]
    %s = reduce_sum(%g) {axes = [1], keepdims = false} : f32[4]
    yield %g, %s
  }
  %r = relu(%f#0) : f32[4,6]
  return %r, %f#1
}""", [fx, fb], [np.maximum(gelu_tanh(f64(fx) + fb), 0).astype(np.float32),
                 gelu_tanh(f64(fx) + fb).sum(1).astype(np.float32)])

    w = normal(3, 2)
    np.save(os.path.join(OUT, "const.w.npy"), w)
    case("const", """
graph @g(%x: f32[3]) -> (f32[2], f32[2,2], i32[3], f32[3]) {
  %w = const file("const.w.npy") : f32[3,2]
  %0 = matmul(%x, %w) : f32[2]
  %1 = const 0.25 : f32[2,2]
  %2 = const dense<[1, -2, 3]> : i32[3]
  %h = const dense<[0.5, 1.5, 2.5]> : f32[3]
  %3 = mul(%x, %h) : f32[3]
  return %0, %1, %2, %3
}""", [normal(3)], [])
    xc = np.load(os.path.join(OUT, "const.in0.npy"))
    for i, wv in enumerate([(f64(xc) @ w).astype(np.float32), np.full((2, 2), 0.25, np.float32),
                            np.array([1, -2, 3], np.int32), xc * np.array([0.5, 1.5, 2.5], np.float32)]):
        np.save(os.path.join(OUT, f"const.out{i}.npy"), wv)

    sx, sw = normal(5, 3), normal(3, 2)
    case("symbolic", """
graph @g(%x: f32[N,3], %w: f32[3,2], %y: f32[N,1]) -> (f32[N,2], f32[1,2]) {
  %0 = matmul(%x, %w) : f32[N,2]
  %1 = add(%0, %y) : f32[N,2]
  %2 = reduce_sum(%1) {axes = [0]} : f32[1,2]
  return %1, %2
}""", [sx, sw, normal(5, 1)], [])
    sy = np.load(os.path.join(OUT, "symbolic.in2.npy"))
    np.save(os.path.join(OUT, "symbolic.out0.npy"), (f64(sx) @ sw + sy).astype(np.float32))
    np.save(os.path.join(OUT, "symbolic.out1.npy"), (f64(sx) @ sw + sy).sum(0, keepdims=True).astype(np.float32))

    # floor, ceil and round (ONNX Floor, Ceil, Round: timm's same-padding and HF
    # MobileViT's patch sizes; fake quantisation): halves (round: to even), signed zeros, past 2^23 (already
    # integers), infinities and NaN; f16 too (fixed values: no draw)
    fv = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, -1.0, 3.0, 0.7, -0.7, 9.99, -9.99,
                   8388609.0, -8388609.0, 1e30, np.inf, -np.inf, np.nan], np.float32)
    fh = fv.astype(np.float16)
    case("floor_ceil", """
graph @g(%x: f32[20], %h: f16[20]) -> (f32[20], f32[20], f16[20], f16[20], f32[20], f16[20]) {
  %0 = floor(%x) : f32[20]
  %1 = ceil(%x) : f32[20]
  %2 = floor(%h) : f16[20]
  %3 = ceil(%h) : f16[20]
  %4 = round(%x) : f32[20]
  %5 = round(%h) : f16[20]
  return %0, %1, %2, %3, %4, %5
}""", [fv, fh], [np.floor(fv), np.ceil(fv), np.floor(fh), np.ceil(fh), np.round(fv), np.round(fh)])


if __name__ == "__main__":
    main()
