#!/usr/bin/env python3
"""The interpreter's conv, conv_transpose, max_pool and avg_pool against a
reference written from the definitions in docs/ops.md with numpy, on random
attributes: 1-D to 3-D, strides, asymmetric pads, dilations, groups
(depthwise too), bias, ceil_mode, count_include_pad, channels_last, and
several dtypes.  Each case is one .kf run by kfuse-run --expect.

    ref_ops.py KFUSE_RUN WORKDIR [--cases N] [--seed S]
"""
import argparse
import itertools
import os
import subprocess
import sys

import numpy as np


def out_size(n, k, s, d, pb, pe, ceil):
    span = n + pb + pe - (d * (k - 1) + 1)
    o = span // s + 1
    if ceil and span % s and o * s < n + pb:
        o += 1
    return o


def taps_view(xp, starts, steps, counts):
    """xp[:, :, starts[i] :: steps[i]][:counts[i]] over the spatial dims."""
    idx = [slice(None), slice(None)]
    for st, sp, c in zip(starts, steps, counts):
        idx.append(slice(st, st + sp * (c - 1) + 1, sp))
    return xp[tuple(idx)]


def ref_conv(x, w, b, s, d, pb, pe, group):
    nsp = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pb, pe)))
    N, C = x.shape[:2]
    O, Cg = w.shape[:2]
    ks = w.shape[2:]
    out = [out_size(x.shape[2 + i], ks[i], s[i], d[i], pb[i], pe[i], False) for i in range(nsp)]
    y = np.zeros([N, O] + out)
    Og = O // group
    for t in itertools.product(*[range(k) for k in ks]):
        v = taps_view(xp, [t[i] * d[i] for i in range(nsp)], s, out)
        for g in range(group):
            xs = v[:, g * Cg:(g + 1) * Cg]
            wt = w[(slice(g * Og, (g + 1) * Og), slice(None)) + t]
            y[:, g * Og:(g + 1) * Og] += np.einsum('nc...,oc->no...', xs, wt)
    if b is not None:
        y += b.reshape([1, O] + [1] * nsp)
    return y


def ref_conv_transpose(x, w, b, s, d, pb, pe, group, opad):
    nsp = x.ndim - 2
    N, C = x.shape[:2]
    Og = w.shape[1]
    ks = w.shape[2:]
    O = Og * group
    Cg = C // group
    ins = x.shape[2:]
    full = [s[i] * (ins[i] - 1) + d[i] * (ks[i] - 1) + 1 + opad[i] for i in range(nsp)]
    canvas = np.zeros([N, O] + full)
    for t in itertools.product(*[range(k) for k in ks]):
        idx = [slice(None), slice(None)]
        for i in range(nsp):
            st = t[i] * d[i]
            idx.append(slice(st, st + s[i] * (ins[i] - 1) + 1, s[i]))
        for g in range(group):
            xs = x[:, g * Cg:(g + 1) * Cg]
            wt = w[(slice(g * Cg, (g + 1) * Cg), slice(None)) + t]
            idx[1] = slice(g * Og, (g + 1) * Og)
            canvas[tuple(idx)] += np.einsum('nc...,co->no...', xs, wt)
    out = [full[i] - pb[i] - pe[i] for i in range(nsp)]
    y = canvas[tuple([slice(None), slice(None)] + [slice(pb[i], pb[i] + out[i]) for i in range(nsp)])]
    if b is not None:
        y = y + b.reshape([1, O] + [1] * nsp)
    return y


def ref_pool(x, kind, k, s, d, pb, pe, ceil, cip):
    nsp = x.ndim - 2
    ins = x.shape[2:]
    out = [out_size(ins[i], k[i], s[i], d[i], pb[i], pe[i], ceil) for i in range(nsp)]
    # a canvas long enough for every tap of every window
    extra = [max(0, (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - (pb[i] + ins[i] + pe[i])) for i in range(nsp)]
    widths = [(0, 0), (0, 0)] + [(pb[i], pe[i] + extra[i]) for i in range(nsp)]
    xf = x.astype(np.float64) if x.dtype.kind == 'f' else x.astype(np.int64)
    inside = np.pad(np.ones(x.shape, bool), widths)
    padded = np.ones(list(x.shape[:2]) + [pb[i] + ins[i] + pe[i] for i in range(nsp)], bool)
    padded = np.pad(padded, [(0, 0), (0, 0)] + [(0, extra[i]) for i in range(nsp)])
    if kind == 'max':
        low = -np.inf if xf.dtype.kind == 'f' else np.iinfo(np.int64).min
        xp = np.pad(xf, widths, constant_values=low)
        y = None
        for t in itertools.product(*[range(kk) for kk in k]):
            v = taps_view(xp, [t[i] * d[i] for i in range(nsp)], s, out)
            y = v.copy() if y is None else np.where(np.isnan(y) | (v > y) | np.isnan(v), v, y)
        return y
    xp = np.pad(xf, widths)
    tot = np.zeros([x.shape[0], x.shape[1]] + out)
    cnt = np.zeros_like(tot)
    for t in itertools.product(*[range(kk) for kk in k]):
        st = [t[i] * d[i] for i in range(nsp)]
        tot += taps_view(xp, st, s, out)
        cnt += taps_view(padded if cip else inside, st, s, out)
    return tot / cnt


def to_last(a):
    return np.moveaxis(a, 1, -1)


def kf_type(dt, shape):
    return '%s[%s]' % (dt, ','.join(str(v) for v in shape))


def lst(v):
    return '[' + ', '.join(str(int(a)) for a in v) + ']'


NP_DT = {'f32': np.float32, 'f64': np.float64, 'f16': np.float16, 'i32': np.int32}


def make_case(rng, idx):
    """Returns (kf text, inputs {name: array}, expected output)."""
    op = ['conv', 'conv', 'conv', 'conv_transpose', 'max_pool', 'avg_pool'][rng.integers(6)]
    nsp = int(rng.choice([1, 2, 2, 2, 3]))
    big = 9 if nsp < 3 else 5
    ins = [int(rng.integers(1, big)) for _ in range(nsp)]
    N = int(rng.integers(1, 3))
    s = [int(rng.integers(1, 4)) for _ in range(nsp)]
    d = [int(rng.choice([1, 1, 2, 3])) for _ in range(nsp)]
    dt = 'f32'
    r = rng.random()
    if r < 0.1:
        dt = 'f64'
    elif r < 0.2 and op != 'conv_transpose':
        dt = 'f16'
    elif r < 0.35 and op == 'max_pool':
        dt = 'i32'
    attrs = {}
    cl = op in ('conv', 'max_pool', 'avg_pool') and rng.random() < 0.4
    if op in ('conv', 'conv_transpose'):
        group = int(rng.choice([1, 1, 2, 3]))
        Cg = int(rng.integers(1, 4))
        C = group * Cg
        if op == 'conv' and rng.random() < 0.2:  # depthwise
            group, Cg = C, 1
        Og = int(rng.integers(1, 4))
        O = Og * group
        k = [int(rng.integers(1, 4)) for _ in range(nsp)]
        for i in range(nsp):  # the dilated kernel must fit the padded input
            while d[i] * (k[i] - 1) + 1 > ins[i] + 4 and (k[i] > 1 or d[i] > 1):
                k[i], d[i] = max(1, k[i] - 1), max(1, d[i] - 1)
        pb = [int(rng.integers(0, 3)) for _ in range(nsp)]
        pe = [int(rng.integers(0, 3)) for _ in range(nsp)]
        bias = rng.random() < 0.6
        if op == 'conv':
            for i in range(nsp):
                if ins[i] + pb[i] + pe[i] < d[i] * (k[i] - 1) + 1:
                    pe[i] = d[i] * (k[i] - 1) + 1 - ins[i] - pb[i]
            wshape = [O, Cg] + k
        else:
            opad = [int(rng.integers(0, max(s[i], d[i]))) for i in range(nsp)]
            for i in range(nsp):
                full = s[i] * (ins[i] - 1) + d[i] * (k[i] - 1) + 1 + opad[i]
                while pb[i] + pe[i] >= full:
                    pb[i], pe[i] = pb[i] // 2, pe[i] // 2
            wshape = [C, Og] + k
            if any(opad):
                attrs['output_padding'] = lst(opad)
        x = rng.standard_normal([N, C] + ins)
        w = rng.standard_normal(wshape)
        b = rng.standard_normal([O]) if bias else None
        if group != 1:
            attrs['group'] = str(group)
    else:
        C = int(rng.integers(1, 4))
        k = [int(rng.integers(1, 4)) for _ in range(nsp)]
        for i in range(nsp):
            while d[i] * (k[i] - 1) + 1 > ins[i] and (k[i] > 1 or d[i] > 1):
                k[i], d[i] = max(1, k[i] - 1), max(1, d[i] - 1)
        keff = [d[i] * (k[i] - 1) + 1 for i in range(nsp)]
        pb = [int(rng.integers(0, keff[i])) for i in range(nsp)]
        pe = [int(rng.integers(0, keff[i])) for i in range(nsp)]
        ceil = rng.random() < 0.4
        cip = op == 'avg_pool' and rng.random() < 0.5
        attrs['kernel_shape'] = lst(k)
        if ceil:
            attrs['ceil_mode'] = 'true'
        if cip:
            attrs['count_include_pad'] = 'true'
        if dt == 'i32':
            x = rng.integers(-50, 50, [N, C] + ins)
        else:
            x = rng.standard_normal([N, C] + ins)
    if any(v != 1 for v in s):
        attrs['strides'] = lst(s)
    if any(v != 1 for v in d):
        attrs['dilations'] = lst(d)
    if any(pb) or any(pe):
        attrs['pads'] = lst(pb + pe)
    # round the inputs to the dtype first, so the reference sees the same values
    x = x.astype(NP_DT[dt])
    if op == 'conv':
        w, b = w.astype(NP_DT[dt]), None if b is None else b.astype(NP_DT[dt])
        y = ref_conv(x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
                     s, d, pb, pe, group)
    elif op == 'conv_transpose':
        w, b = w.astype(NP_DT[dt]), None if b is None else b.astype(NP_DT[dt])
        y = ref_conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               None if b is None else b.astype(np.float64), s, d, pb, pe, group,
                               [int(v) for v in attrs.get('output_padding', '[' + ','.join('0' * nsp) + ']')
                                .strip('[]').split(',')])
    else:
        y = ref_pool(x, 'max' if op == 'max_pool' else 'avg', k, s, d, pb, pe, ceil, cip)
    inputs = {'x': x}
    operands = ['%x']
    if op in ('conv', 'conv_transpose'):
        inputs['w'] = w
        operands.append('%w')
        if b is not None:
            inputs['b'] = b
            operands.append('%b')
    if cl:
        attrs['channels_last'] = 'true'
        inputs['x'] = np.ascontiguousarray(to_last(x))
        if op == 'conv':
            inputs['w'] = np.ascontiguousarray(to_last(w))
        y = to_last(y)
    y = y.astype(NP_DT[dt]) if dt != 'i32' else y.astype(np.int32)
    args = ', '.join('%%%s: %s' % (nm, kf_type(dt, a.shape)) for nm, a in inputs.items())
    at = ', '.join('%s = %s' % kv for kv in sorted(attrs.items()))
    yt = kf_type(dt, y.shape)
    text = ('graph @case%d(%s) -> (%s) {\n  %%y = %s(%s)%s : %s\n  return %%y\n}\n'
            % (idx, args, yt, op, ', '.join(operands), ' {%s}' % at if at else '', yt))
    return text, inputs, y, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('run')
    ap.add_argument('work')
    ap.add_argument('--cases', type=int, default=150)
    ap.add_argument('--seed', type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.work, exist_ok=True)
    tol = {'f32': ('1e-5', '1e-5'), 'f64': ('1e-12', '1e-12'), 'f16': ('2e-3', '2e-3'), 'i32': ('0', '0')}
    failed = 0
    for i in range(a.cases):
        text, inputs, y, dt = make_case(rng, i)
        base = os.path.join(a.work, 'case%d' % i)
        with open(base + '.kf', 'w') as f:
            f.write(text)
        cmd = [a.run, base + '.kf', '--rtol', tol[dt][0], '--atol', tol[dt][1]]
        for nm, v in inputs.items():
            np.save('%s.%s.npy' % (base, nm), v)
            cmd += ['--input', '%s=%s.%s.npy' % (nm, base, nm)]
        np.save(base + '.want.npy', np.ascontiguousarray(y))
        cmd += ['--expect', '0=%s.want.npy' % base]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            failed += 1
            print('FAIL case %d (%s):\n%s%s' % (i, base + '.kf', text, p.stdout[-2000:]))
    print('%d of %d cases match the numpy reference' % (a.cases - failed, a.cases))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
