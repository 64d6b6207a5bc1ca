#!/usr/bin/env python3
"""bench/gpu/depthwise_bench.py BUILD OUT [--dry]: the depthwise benchmark of
bench/gpu/depthwise.sh (issue 21's bar: depthwise convs at 80% of copy
bandwidth, batch 32).

Every distinct depthwise layer (groups = in = out channels) of MobileNetV2,
MobileNetV3-Large, EfficientNet-B0 and ConvNeXt-T (torchvision, 224x224,
shapes by forward hooks), at batch 32 and 1, fp16 channels-last conv +
bias + ReLU as one kfuse kernel (bench/gpu/conv_bench.py's layer text),
run by kfuse-run once per variant of $KFUSE_DEPTHWISE (cuda/emit_depthwise.c):
  default  the backend's own choice (unset)
  rows     the rows kernel forced, its own shape (cuda/emit_depthwise_rows.c)
  tiled    the tiled kernel forced ("" : set but empty)
  toep     the Toeplitz tensor-core kernel forced (cuda/emit_depthwise_toep.c)
  vector   the vector kernel forced
  other    any $KFUSE_DEPTHWISE text, e.g. rows:v4x3h8 or r4t2
Each variant's output is checked against PyTorch's (--expect, rtol = atol
= 2e-2) and timed (--bench: median of CUDA-graph replays), beside cuDNN's
conv with the bias and ReLU as its own kernel (eager, channels_last).
GB/s = (x + w + b + y bytes, each once) / time, and its share of a copy
ceiling measured in the same run (torch copy_ of 1 GiB f16); beside it a
copy of the layer's own bytes (torch copy_ of nbytes / 2 each way), the
ceiling at that size, where launch and the ramp count ("vs same-size copy":
its time / the variant's).  $KFUSE_BENCH_FLUSH=1 flushes L2 before each
kfuse replay, as do_bench does for PyTorch's.

--dry (no GPU: this script's own check on a CPU machine): batch 1 only
unless DW_BATCHES says otherwise; each variant compiled for sm_90 by
kfuse-run --backend=cuda --compile-only, and the layer checked on the CPU
interpreter against PyTorch's CPU result (f32 conv rounded to f16).

Environment: DW_N (timed runs, default 30), DW_MODELS (comma list),
DW_BATCHES (default 32,1), DW_VARIANTS (default default,rows,tiled),
DW_LIMIT (layers a model), DW_KEEP=1 (keep the .npy files); DW_RANDOM=K
(with DW_SEED, default 1): instead of the models' layers, K random ones
(model "rand"): channels (multiples of 8 and not), kernels 1 to 9 each
way, strides 1 to 3, dilations 1 to 3, pads, images 3 to 72 each way,
each at its own batch (1 to 48), up to 64 MB: geometries no model here
has, for every kernel's checks.
"""
import json
import os
import random
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conv_bench as cb  # noqa: E402  (layers_of, layer_kf, out_hw, sh, bench_ms)

DRY = '--dry' in sys.argv[3:]
N = int(os.environ.get('DW_N', '30'))
MODELS = os.environ.get('DW_MODELS', 'mobilenet_v2,mobilenet_v3_large,efficientnet_b0,convnext_tiny').split(',')
BATCHES = [int(b) for b in os.environ.get('DW_BATCHES', '1' if DRY else '32,1').split(',')]
VARIANTS = os.environ.get('DW_VARIANTS', 'default,rows,tiled').split(',')
LIMIT = int(os.environ.get('DW_LIMIT', '0'))
KEEP = os.environ.get('DW_KEEP', '0') == '1'
RANDOM = int(os.environ.get('DW_RANDOM', '0'))
SEED = int(os.environ.get('DW_SEED', '1'))
SHORT = {'mobilenet_v2': 'mbv2', 'mobilenet_v3_large': 'mbv3', 'efficientnet_b0': 'effb0', 'convnext_tiny': 'cnxt'}
dev = 'cpu' if DRY else 'cuda'
RUN = OUT = results = None


def say(line):
    print(line, flush=True)
    results.write(line + '\n')
    results.flush()


def variant_env(v):
    """The environment of variant v: $KFUSE_DEPTHWISE unset (default),
    empty (tiled) or v's own text."""
    env = dict(os.environ)
    env.pop('KFUSE_DEPTHWISE', None)
    if v != 'default':
        env['KFUSE_DEPTHWISE'] = '' if v == 'tiled' else v
    return env


def sh_env(cmd, env, timeout=600):
    """cb.sh with an environment."""
    import subprocess
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or '') + '\n(timed out)'


def depthwise_layers(name):
    """(C, k, s, p, d, H, W) of the model's distinct depthwise convs."""
    cb.LIMIT = 0
    out = [(C, k, s, p, d, H, W) for (C, O, k, s, p, d, g, H, W) in cb.layers_of(name) if g == C == O and C > 1]
    return out[:LIMIT] if LIMIT else out


def random_layers(n, seed):
    """n ((C, k, s, p, d, H, W), B) of random geometry (DW_RANDOM)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        C = rng.choice([8, 16, 24, 32, 40, 64, 72, 96, 120, 144, 200, 240, 256, 384, 480, 12, 20, 36, 4])
        k = (rng.randint(1, 9), rng.randint(1, 9))
        s = (rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2, 3]))
        d = (rng.choice([1, 1, 1, 2, 3]), rng.choice([1, 1, 1, 2, 3]))
        p = (rng.randint(0, (k[0] - 1) * d[0] // 2 + 1), rng.randint(0, (k[1] - 1) * d[1] // 2 + 1))
        H, W = rng.randint(3, 72), rng.randint(3, 72)
        if cb.out_hw(H, k[0], s[0], p[0], d[0]) < 1 or cb.out_hw(W, k[1], s[1], p[1], d[1]) < 1:
            continue
        B = rng.choice([1, 2, 8, 32, 48])
        while B > 1 and 2.0 * B * H * W * C > 32e6:
            B //= 2
        out.append(((C, k, s, p, d, H, W), B))
    return out


def torch_layer(B, C, k, s, p, d, H, W, seed):
    """x, w, b and the reference y (NCHW, channels_last on the GPU): cuDNN
    in f16 on the GPU; on the CPU an f32 conv rounded to f16."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, C, H, W, generator=g).half()
    w = (torch.randn(C, 1, k[0], k[1], generator=g) / (k[0] * k[1]) ** 0.5).half()
    b = torch.randn(C, generator=g).half()
    if dev == 'cuda':
        x = x.to(dev).to(memory_format=torch.channels_last)
        w = w.to(dev).to(memory_format=torch.channels_last)
        b = b.to(dev)

    def f(x, w, b):
        return F.relu(F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=C))
    with torch.no_grad():
        y = f(x, w, b) if dev == 'cuda' else f(x.float(), w.float(), b.float()).half()
    return f, x, w, b, y


def nhwc(t):
    return t.permute(0, 2, 3, 1).contiguous().cpu().numpy()


def why(rc, out):
    """The line of kfuse-run's output that says what failed."""
    lines = [l for l in out.strip().splitlines() if l.strip()]
    errs = [l for l in lines if 'error' in l or 'FAIL' in l or 'mismatch' in l]
    return (errs or lines or ['rc %d' % rc])[-1].strip()[:140]


def run_variant(v, base, B):
    """(check, ms, note) of variant v on the layer's files at base."""
    io = ['--input', 'x=%s.x.npy' % base, '--input', 'w=%s.w.npy' % base, '--input', 'b=%s.b.npy' % base]
    if DRY:
        rc, out = sh_env([RUN, base + '.kf', '--backend=cuda', '--compile-only'] + io, variant_env(v))
        return ('compiles' if rc == 0 else 'FAIL'), None, '' if rc == 0 else why(rc, out)
    cmd = [RUN, base + '.kf', '--backend=cuda', '--expect', '0=%s.y.npy' % base, '--rtol', '2e-2', '--atol', '2e-2',
           '--bench', str(N)] + io
    rc, out = sh_env(cmd, variant_env(v))
    note = '' if rc == 0 else why(rc, out)
    return ('ok' if rc == 0 else 'FAIL'), cb.bench_ms(out), note


def run_layer(mname, li, layer, B, copy, stats):
    C, k, s, p, d, H, W = layer
    two = lambda t: '%d' % t[0] if t[0] == t[1] else '%d,%d' % t  # noqa: E731
    desc = '%d ch %dx%d /%s p%s d%s %dx%d' % (C, k[0], k[1], two(s), two(p), two(d), H, W)
    OH, OW = cb.out_hw(H, k[0], s[0], p[0], d[0]), cb.out_hw(W, k[1], s[1], p[1], d[1])
    nbytes = 2.0 * (B * H * W * C + C * k[0] * k[1] + C + B * OH * OW * C)
    tag = '%s_l%d_b%d' % (SHORT.get(mname, mname), li, B)
    base = os.path.join(OUT, tag)
    row = dict(model=mname, layer=li, desc=desc, batch=B, mbytes=nbytes / 1e6)
    cells, notes = [], []
    try:
        text, _ = cb.layer_kf(tag, B, C, C, k, s, p, d, C, H, W)
        with open(base + '.kf', 'w') as fh:
            fh.write(text)
        f, x, w, b, y = torch_layer(B, C, k, s, p, d, H, W, 1000 * li + B)
        np.save(base + '.x.npy', nhwc(x))
        np.save(base + '.w.npy', nhwc(w))
        np.save(base + '.b.npy', b.cpu().numpy())
        np.save(base + '.y.npy', nhwc(y))
        if DRY:  # the graph itself on the interpreter, against PyTorch
            rc, out = cb.sh([RUN, base + '.kf', '--input', 'x=%s.x.npy' % base, '--input', 'w=%s.w.npy' % base,
                             '--input', 'b=%s.b.npy' % base, '--expect', '0=%s.y.npy' % base, '--rtol', '2e-2',
                             '--atol', '2e-2'])
            cells.append('cpu:%s' % ('ok' if rc == 0 else 'FAIL'))
            if rc != 0:
                notes.append('cpu: ' + why(rc, out))
        for v in VARIANTS:
            check, ms, note = run_variant(v, base, B)
            row[v] = dict(check=check, ms=ms)
            if ms and check == 'ok':
                frac = nbytes / (ms * 1e-3) / 1e9 / copy
                row[v]['copy'] = frac
                stats.setdefault((v, B), []).append(frac)
                cells.append('%s:%s %.4f %3.0f%%' % (v, check, ms, 100 * frac))
            else:
                cells.append('%s:%s' % (v, check))
            if note:
                notes.append('%s: %s' % (v, note))
        if not DRY:
            # a copy of the same bytes (read and write, nbytes in all):
            # the ceiling at this size, where launch and ramp count
            ca = torch.empty(int(nbytes) // 4, device=dev, dtype=torch.float16)
            cb_ = torch.empty_like(ca)
            row['copy_ms'] = cb.do_bench(lambda: cb_.copy_(ca))
            del ca, cb_
            for v in VARIANTS:
                if row[v].get('copy'):
                    stats.setdefault((v + ' vs same-size copy', B), []).append(row['copy_ms'] / row[v]['ms'])
            row['cudnn'] = cb.do_bench(lambda: f(x, w, b))
            frac = nbytes / (row['cudnn'] * 1e-3) / 1e9 / copy
            stats.setdefault(('cudnn+relu', B), []).append(frac)
            cells.append('cudnn+relu %.4f %3.0f%%' % (row['cudnn'], 100 * frac))
            cells.append('copy %.4f' % row['copy_ms'])
    except Exception as e:
        notes.append('ERROR %s' % str(e)[:100])
        traceback.print_exc()
    finally:
        if not KEEP:
            for suf in ('.x.npy', '.w.npy', '.b.npy', '.y.npy'):
                if os.path.exists(base + suf):
                    os.remove(base + suf)
    say('%-6s %-3d %-28s %3d %6.1f  %s%s' % (SHORT.get(mname, mname), li, desc, B, nbytes / 1e6, '  '.join(cells),
                                           ('  [' + '; '.join(notes) + ']') if notes else ''))
    results.write(json.dumps(row) + '\n')


def main():
    global RUN, OUT, results
    build, OUT = sys.argv[1], sys.argv[2]
    RUN = os.path.join(build, 'kfuse-run')
    results = open(os.path.join(OUT, 'depthwise-results.txt'), 'a')
    say('depthwise_bench: %s, torch %s, %s%s' % (time.strftime('%Y-%m-%d %H:%M'), torch.__version__,
                                                 'CPU (--dry)' if DRY else torch.cuda.get_device_name(),
                                                 ', variants ' + ','.join(VARIANTS)))
    copy = 1.0 if DRY else cb.copy_gbs()
    if not DRY:
        say('copy ceiling (torch copy_ of 1 GiB, f16): %.0f GB/s; each variant: check, median ms, %% of copy '
            '((x + w + b + y bytes) / time / ceiling); MB = those bytes' % copy)
    say('%-6s %-3s %-28s %3s %6s  %s' % ('model', 'l', 'layer (C kxk /s pad dil HxW)', 'B', 'MB', 'variants'))
    stats = {}
    if RANDOM:
        say('random layers: DW_RANDOM=%d DW_SEED=%d' % (RANDOM, SEED))
        for li, (layer, B) in enumerate(random_layers(RANDOM, SEED)):
            run_layer('rand', li, layer, B, copy, stats)
    for mname in ([] if RANDOM else MODELS):
        try:
            layers = depthwise_layers(mname)
        except Exception as e:
            say('%s: cannot list its layers: %s' % (mname, e))
            continue
        for li, layer in enumerate(layers):
            for B in BATCHES:
                run_layer(mname, li, layer, B, copy, stats)
    for (v, B), fr in sorted(stats.items(), key=lambda t: (t[0][1], t[0][0])):
        fr = sorted(fr)
        say('batch %-3d %-12s %3d layers checked and timed, at 80%% of copy or more: %3d (lowest %.0f%%, median '
            '%.0f%%, highest %.0f%%)' % (B, v, len(fr), sum(1 for r in fr if r >= 0.8), 100 * fr[0],
                                         100 * fr[len(fr) // 2], 100 * fr[-1]))


if __name__ == '__main__':
    t0 = time.time()
    main()
    say('depthwise_bench: %.0f s' % (time.time() - t0))
