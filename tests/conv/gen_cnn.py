#!/usr/bin/env python3
"""Random convolutional networks, for differential tests of the passes
around conv (the batch-norm folding rules, layout, fuse-conv, fuse): each
graph runs through the pipeline and must compute what it computed before
(kfuse-opt --check-equivalence, on the interpreter), and pass the verifier
after every pass.

    gen_cnn.py KFUSE_OPT WORKDIR [--graphs N] [--seed S] [--pipeline P]
    gen_cnn.py --print SEED          (one graph on stdout)

A graph is a chain of blocks over an image [N, C, H, W] (sometimes 1-D or
3-D): convolutions with random kernels, strides, asymmetric pads,
dilations, groups (depthwise too) and biases; batch norms written in the
forms exporters use (operand orders shuffled); activations; max and average
pools (ceil_mode, count_include_pad); residual adds and channel concats
with earlier values of the same shape; conv_transpose; a model-side
transpose to channels-last and back around an element-wise op (as ConvNeXt
does); and a head of a global pool, a reshape and a gemm, or the raw map.
Weights are inline constants, so canonicalize can fold what the rules make.
"""
import argparse
import os
import random
import subprocess
import sys


class G:
    def __init__(self, rng):
        self.rng = rng
        self.lines = []
        self.n = 0

    def val(self):
        self.n += 1
        return '%%v%d' % self.n

    def emit(self, text):
        self.lines.append('  ' + text)

    def const(self, shape, lo=-1.0, hi=1.0):
        v = self.val()
        cnt = 1
        for d in shape:
            cnt *= d
        vals = [round(self.rng.uniform(lo, hi), 3) for _ in range(cnt)]

        def nest(vs, sh):
            if not sh:
                return repr(vs[0])
            step = len(vs) // sh[0]
            return '[' + ', '.join(nest(vs[i * step:(i + 1) * step], sh[1:]) for i in range(sh[0])) + ']'
        body = nest(vals, shape) if shape else repr(vals[0])
        kind = 'dense<%s>' % body if shape else body
        self.emit('%s = const %s : %s' % (v, kind, ty(shape)))
        return v


def ty(shape):
    return 'f32[%s]' % ','.join(str(d) for d in shape)


def lst(v):
    return '[' + ', '.join(str(x) for x in v) + ']'


def out_size(n, k, s, d, pb, pe, ceil=False):
    span = n + pb + pe - (d * (k - 1) + 1)
    if span < 0:
        return -1
    o = span // s + 1
    if ceil and span % s and o * s < n + pb:
        o += 1
    return o


def conv(g, x, shape):
    r = g.rng
    N, C, sp = shape[0], shape[1], shape[2:]
    nsp = len(sp)
    group = 1
    if C > 1 and r.random() < 0.3:
        group = C  # depthwise
    elif r.random() < 0.3:
        group = r.choice([d for d in (2, 3) if C % d == 0] or [1])
    O = group * r.randint(1, 3) if group == C else group * r.randint(1, 6 // group + 1)
    k = [r.choice([1, 1, 3, 3, 2, 5]) for _ in sp]
    s = [r.choice([1, 1, 1, 2]) for _ in sp]
    d = [r.choice([1, 1, 1, 2]) for _ in sp]
    pb = [r.randint(0, 2) for _ in sp]
    pe = [r.randint(0, 2) for _ in sp]
    out = []
    for i in range(nsp):
        o = out_size(sp[i], k[i], s[i], d[i], pb[i], pe[i])
        while o < 1:
            k[i], d[i] = 1, 1
            o = out_size(sp[i], k[i], s[i], d[i], pb[i], pe[i])
        out.append(o)
    w = g.const([O, C // group] + k, -0.5, 0.5)
    ops = [x, w]
    if r.random() < 0.5:
        ops.append(g.const([O]))
    attrs = []
    if any(v != 1 for v in s):
        attrs.append('strides = ' + lst(s))
    if any(pb) or any(pe):
        attrs.append('pads = ' + lst(pb + pe))
    if any(v != 1 for v in d):
        attrs.append('dilations = ' + lst(d))
    if group != 1:
        attrs.append('group = %d' % group)
    y = g.val()
    oshape = [N, O] + out
    g.emit('%s = conv(%s)%s : %s' % (y, ', '.join(ops), ' {%s}' % ', '.join(attrs) if attrs else '', ty(oshape)))
    return y, oshape


def batch_norm(g, x, shape):
    """(x - mean) * k + beta, or the sqrt/div form, per channel; operand
    orders and the statistics' shape ([C,1,1] or [1,C,1,1]) at random."""
    r = g.rng
    C = shape[1]
    ps = [C] + [1] * (len(shape) - 2)
    if r.random() < 0.5:
        ps = [1] + ps

    def sw(a, b):
        return (a, b) if r.random() < 0.5 else (b, a)
    mean = g.const(ps)
    y1 = g.val()
    g.emit('%s = sub(%s, %s) : %s' % (y1, x, mean, ty(shape)))
    y2 = g.val()
    if r.random() < 0.5:
        k = g.const(ps, 0.5, 1.5)
        g.emit('%s = mul(%s, %s) : %s' % ((y2,) + sw(y1, k) + (ty(shape),)))
    else:
        var = g.const(ps, 0.5, 2.0)
        eps = g.val()
        g.emit('%s = const 1e-05 : f32[]' % eps)
        ve, sd, yd = g.val(), g.val(), g.val()
        g.emit('%s = add(%s, %s) : %s' % (ve, var, eps, ty(ps)))
        g.emit('%s = sqrt(%s) : %s' % (sd, ve, ty(ps)))
        g.emit('%s = div(%s, %s) : %s' % (yd, y1, sd, ty(shape)))
        gamma = g.const(ps, 0.5, 1.5)
        g.emit('%s = mul(%s, %s) : %s' % ((y2,) + sw(yd, gamma) + (ty(shape),)))
    beta = g.const(ps)
    y3 = g.val()
    g.emit('%s = add(%s, %s) : %s' % ((y3,) + sw(y2, beta) + (ty(shape),)))
    return y3, shape


def activation(g, x, shape):
    r = g.rng
    y = g.val()
    op = r.choice(['relu', 'relu', 'sigmoid', 'silu', 'tanh', 'gelu', 'clip'])
    if op == 'clip':
        lo, hi, t = g.val(), g.val(), g.val()
        g.emit('%s = const 0.0 : f32[]' % lo)
        g.emit('%s = const 6.0 : f32[]' % hi)
        g.emit('%s = max(%s, %s) : %s' % (t, x, lo, ty(shape)))
        g.emit('%s = min(%s, %s) : %s' % (y, t, hi, ty(shape)))
    else:
        g.emit('%s = %s(%s) : %s' % (y, op, x, ty(shape)))
    return y, shape


def pool(g, x, shape):
    r = g.rng
    sp = shape[2:]
    op = r.choice(['max_pool', 'avg_pool'])
    k = [r.choice([1, 2, 3]) for _ in sp]
    s = [r.choice([1, 2]) for _ in sp]
    pb = [r.randint(0, kk - 1) for kk in k]
    pe = [r.randint(0, kk - 1) for kk in k]
    ceil = r.random() < 0.4
    out = []
    for i in range(len(sp)):
        o = out_size(sp[i], k[i], s[i], 1, pb[i], pe[i], ceil)
        if o < 1:
            return x, shape
        out.append(o)
    attrs = ['kernel_shape = ' + lst(k)]
    if any(v != 1 for v in s):
        attrs.append('strides = ' + lst(s))
    if any(pb) or any(pe):
        attrs.append('pads = ' + lst(pb + pe))
    if ceil:
        attrs.append('ceil_mode = true')
    if op == 'avg_pool' and r.random() < 0.5:
        attrs.append('count_include_pad = true')
    y = g.val()
    oshape = shape[:2] + out
    g.emit('%s = %s(%s) {%s} : %s' % (y, op, x, ', '.join(attrs), ty(oshape)))
    return y, oshape


def conv_transpose(g, x, shape):
    r = g.rng
    N, C, sp = shape[0], shape[1], shape[2:]
    group = r.choice([d for d in (1, 2) if C % d == 0])
    Og = r.randint(1, 3)
    k = [r.choice([1, 2, 3]) for _ in sp]
    s = [r.choice([1, 2]) for _ in sp]
    opad = [r.randint(0, s[i] - 1) for i in range(len(sp))]
    pb = [r.randint(0, k[i] // 2) for i in range(len(sp))]
    pe = [r.randint(0, k[i] // 2) for i in range(len(sp))]
    out = [s[i] * (sp[i] - 1) + opad[i] + k[i] - pb[i] - pe[i] for i in range(len(sp))]
    if min(out) < 1:
        return x, shape
    w = g.const([C, Og] + k, -0.5, 0.5)
    attrs = ['strides = ' + lst(s), 'pads = ' + lst(pb + pe)]
    if any(opad):
        attrs.append('output_padding = ' + lst(opad))
    if group != 1:
        attrs.append('group = %d' % group)
    y = g.val()
    oshape = [N, Og * group] + out
    g.emit('%s = conv_transpose(%s, %s) {%s} : %s' % (y, x, w, ', '.join(attrs), ty(oshape)))
    return y, oshape


def model_transpose(g, x, shape):
    """ConvNeXt's permute to channels last, a per-channel op, and back."""
    r = len(shape)
    p = [0] + list(range(2, r)) + [1]
    q = [0, r - 1] + list(range(1, r - 1))
    t, m, b = g.val(), g.val(), g.val()
    tshape = [shape[i] for i in p]
    g.emit('%s = transpose(%s) {perm = %s} : %s' % (t, x, lst(p), ty(tshape)))
    sc = g.const([shape[1]], 0.5, 1.5)
    g.emit('%s = mul(%s, %s) : %s' % (m, t, sc, ty(tshape)))
    g.emit('%s = transpose(%s) {perm = %s} : %s' % (b, m, lst(q), ty(shape)))
    return b, shape


def build(seed):
    rng = random.Random(seed)
    g = G(rng)
    nsp = rng.choice([1, 2, 2, 2, 2, 3])
    N = rng.randint(1, 2)
    C = rng.randint(1, 4)
    sp = [rng.randint(5, 9 if nsp < 3 else 6) for _ in range(nsp)]
    shape = [N, C] + sp
    x = '%x'
    vals = [(x, shape)]
    cur = (x, shape)
    for _ in range(rng.randint(3, 9)):
        kind = rng.choice(['conv', 'conv', 'conv', 'bn', 'act', 'act', 'pool', 'res', 'cat', 'convt', 'perm',
                           'softmax', 'slice'])
        v, s = cur
        if kind == 'softmax':
            y = g.val()
            g.emit('%s = softmax(%s) {axis = %d} : %s' % (y, v, rng.choice([1, -1]), ty(s)))
            cur = (y, s)
        elif kind == 'slice' and s[1] > 1:
            y = g.val()
            ss = [s[0], s[1] - 1] + s[2:]
            g.emit('%s = slice(%s) {starts = [1], ends = [%d], axes = [1]} : %s' % (y, v, s[1], ty(ss)))
            cur = (y, ss)
        elif kind == 'conv':
            cur = conv(g, v, s)
            if rng.random() < 0.6:
                cur = batch_norm(g, *cur)
            if rng.random() < 0.7:
                cur = activation(g, *cur)
        elif kind == 'bn':
            cur = batch_norm(g, v, s)
        elif kind == 'act':
            cur = activation(g, v, s)
        elif kind == 'pool':
            cur = pool(g, v, s)
        elif kind == 'convt' and rng.random() < 0.5:
            cur = conv_transpose(g, v, s)
        elif kind == 'perm':
            cur = model_transpose(g, v, s)
        elif kind in ('res', 'cat'):
            same = [(u, t) for u, t in vals if t == s and u != v]
            if not same:
                continue
            u, _ = rng.choice(same)
            y = g.val()
            if kind == 'res':
                g.emit('%s = add(%s, %s) : %s' % (y, v, u, ty(s)))
                cur = (y, s)
            else:
                cs = [s[0], 2 * s[1]] + s[2:]
                g.emit('%s = concat(%s, %s) {axis = 1} : %s' % (y, v, u, ty(cs)))
                cur = (y, cs)
        vals.append(cur)
    v, s = cur
    outs = [(v, s)]
    if rng.random() < 0.5:  # a classifier head: global pool, flatten, gemm
        m, f, o = g.val(), g.val(), g.val()
        ms = s[:2] + [1] * (len(s) - 2)
        if rng.random() < 0.5:
            g.emit('%s = reduce_mean(%s) {axes = %s, keepdims = true} : %s' % (m, v, lst(range(2, len(s))), ty(ms)))
            g.emit('%s = reshape(%s) {shape = [%d, %d]} : %s' % (f, m, s[0], s[1], ty(s[:2])))
        else:
            op = rng.choice(['reduce_mean', 'reduce_max'])
            g.emit('%s = %s(%s) {axes = %s, keepdims = false} : %s' % (f, op, v, lst(range(2, len(s))), ty(s[:2])))
        w = g.const([s[1], 3])
        g.emit('%s = matmul(%s, %s) : %s' % (o, f, w, ty([s[0], 3])))
        outs = [(o, [s[0], 3])]
        if rng.random() < 0.5:
            outs.append((v, s))
    text = 'graph @cnn%d(%%x: %s) -> (%s) {\n' % (seed, ty(shape), ', '.join(ty(t) for _, t in outs))
    text += '\n'.join(g.lines) + '\n  return %s\n}\n' % ', '.join(u for u, _ in outs)
    return text


DEFAULT_PIPELINE = ('canonicalize,cse,rules{path=%s},canonicalize,cse,layout,pad-channels,canonicalize,cse,fuse-conv,fuse,dce'
                    % os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'patterns'))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('opt', nargs='?')
    ap.add_argument('work', nargs='?')
    ap.add_argument('--graphs', type=int, default=40)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--pipeline', default=DEFAULT_PIPELINE)
    ap.add_argument('--print', type=int, metavar='SEED')
    a = ap.parse_args()
    if a.print is not None:
        sys.stdout.write(build(a.print))
        return 0
    os.makedirs(a.work, exist_ok=True)
    failed = 0
    for i in range(a.graphs):
        seed = a.seed * 100000 + i
        path = os.path.join(a.work, 'cnn%d.kf' % seed)
        with open(path, 'w') as f:
            f.write(build(seed))
        cmd = [a.opt, path, '-p', a.pipeline, '--verify-each', '--check-equivalence', '--seed', str(seed),
               '--rtol', '1e-3', '--atol', '1e-4', '-o', path + '.out']
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0 or '[ok]' not in p.stdout:
            failed += 1
            print('FAIL %s (gen_cnn.py --print %d):\n%s' % (path, seed, p.stdout[-3000:]))
    print('%d of %d random CNNs compute the same after the pipeline' % (a.graphs - failed, a.graphs))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
