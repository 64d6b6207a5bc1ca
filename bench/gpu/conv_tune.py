#!/usr/bin/env python3
"""bench/gpu/conv_tune.py BUILD OUT: the conv kernels' variants on the GPU,
for bench/gpu/conv_tune.sh (docs/conv.md, "Tuning").

Every distinct conv layer of ResNet-50 (conv_bench.py's list) at batch 1
and 32 goes into one graph per batch, each layer a conv + bias + ReLU
kernel with its own inputs (the stem's 3 channels padded to 8, as
pad-channels makes them in a model).  Steps (CONV_TUNE_STEPS, default
tune,e2e,cudnn,check):

  tune   kfuse-run --tune=force over it: every candidate of every layer
         (those of KFUSE_TUNE_CANDIDATES: CANDS below, by batch, or
         $CONV_TUNE_CANDIDATES) timed (the report's "tune:" lines), the
         winners written to OUT/tune.txt (KFUSE_TUNE_FILE), then the tuned
         graph checked against the interpreter, timed (--bench) and
         profiled;
  e2e    ResNet-50 fp16 end to end (exported by PyTorch, imported, the CNN
         pipeline) checked against PyTorch and timed with the defaults
         (no tune file, no shipped table) and with OUT/tune.txt, profiled;
  e2etune  (not by default; after e2e) ResNet-50's own convs tuned, their
         keys (residual epilogues too) into OUT/tune-e2e.txt, and timed so;
  cudnn  each layer's cuDNN conv + separate ReLU (PyTorch eager, channels
         last) beside the tuned kernel's time from the tune step;
  check  the graph on the GPU against the CPU interpreter (kfuse-run
         --compare=cpu), with the default configs and, at batch 1 (every
         batch with CONV_TUNE_CHECK_ALL=1), with tiles forced by
         KFUSE_CONV_TILE (CONV_TUNE_CHECK_TILES, e.g. cudnn; a tile a
         layer cannot take leaves its default).

Each step's output goes to OUT/<step>-*.txt; a summary table last.
CONV_BATCHES (default 1,32).
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conv_bench as cb  # noqa: E402

BUILD, OUT = sys.argv[1], sys.argv[2]
cb.setup(BUILD, OUT)
STEPS = os.environ.get('CONV_TUNE_STEPS', 'tune,e2e,cudnn,check').split(',')
BATCHES = [int(b) for b in os.environ.get('CONV_BATCHES', '1,32').split(',')]
TILES = os.environ.get('CONV_TUNE_CHECK_TILES', 'wgc128x128x64s4s').split(',')
TUNE = os.path.join(OUT, 'tune.txt')
summary = []


def log(name, out):
    with open(os.path.join(OUT, name), 'a') as f:
        f.write(out)


def kfrun(args, env=None, timeout=300):
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.time()
    try:
        p = subprocess.run([cb.RUN] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=e)
        return p.returncode, p.stdout, time.time() - t0
    except subprocess.TimeoutExpired as x:
        return 124, (x.stdout or '') + '\n(timed out)', time.time() - t0


def layers_graph(B):
    """OUT/layers_b<B>.kf: every distinct ResNet-50 layer at batch B, the
    stem's 3 channels padded to 8 as pad-channels makes them in a model
    (the conv kernel the end-to-end run has)."""
    layers = cb.layers_of('resnet50')
    args, body, outs, types = [], [], [], []
    for i, (C, O, k, s, p, d, g, H, W) in enumerate(layers):
        if cb.padded(C, g):
            C = (C + 7) // 8 * 8
        a, f, yt, _ = cb.layer_parts(i, B, C, O, k, s, p, d, g, H, W)
        args.append(a)
        body.append(f)
        outs.append('%%y%d' % i)
        types.append(yt)
    path = os.path.join(OUT, 'layers_b%d.kf' % B)
    with open(path, 'w') as fh:
        fh.write('graph @resnet50_layers_b%d(%s) -> (%s) {\n%s  return %s\n}\n' % (
            B, ', '.join(args), ', '.join(types), ''.join(body), ', '.join(outs)))
    return path, layers


def bench_ms(out):
    m = re.search(r'bench cuda @\S+: \d+ runs, median ([0-9.]+) ms', out)
    return float(m.group(1)) if m else None


def step_check():
    for B in BATCHES:
        path, _ = layers_graph(B)
        # (a large batch checks the defaults; the tune step checks its picks)
        for tile in ['default'] + (TILES if B == 1 or os.environ.get('CONV_TUNE_CHECK_ALL') == '1' else []):
            env = {'KFUSE_TUNE_FILE': os.path.join(OUT, 'none.txt'), 'KFUSE_TUNE_SHIPPED': '0'}
            if tile != 'default':
                env['KFUSE_CONV_TILE'] = tile
            rc, out, dt = kfrun([path, '--backend=cuda', '--random-inputs', '--compare=cpu', '--rtol', '2e-2',
                                 '--atol', '2e-2', '--bench', '10'], env)
            log('check-b%d-%s.txt' % (B, tile), out)
            ok = 'ok' if rc == 0 else 'FAIL'
            line = 'check b%-3d %-22s %-4s graph %s ms (%.0f s)%s' % (
                B, tile, ok, bench_ms(out), dt, '' if rc == 0 else ': ' + out.strip().splitlines()[-1][:150])
            print(line, flush=True)
            summary.append(line)


# the candidates a sweep times (KFUSE_TUNE_CANDIDATES; a layer tries those
# of them that fit it), by batch: big tiles for many rows, small and split
# ones for few; the previous default mma.sync tiles for reference
CANDS = {
    'large': 'wgc128x128x64s4s,wgc128x64x64s6s,wgc128x256x64s4s,wgc256x128x64s4s,wgc64x128x64s6s,'
             'wgc64x64x64s6k4s,wgc128x64x64s6k2s,wgc128x128x64s4k2s,wgc128x64x64s3s,wgc128x128x64s3s,'
             'wg128x128x64s4pvs,wg128x256x64s4c2pvs,mma128x128x32w2x4s3,mma64x64x32w2x2s4',
    'small': 'wgc64x64x64s8s,wgc64x64x64s4s,wgc64x128x64s6s,wgc128x64x64s6s,wgc128x64x64s3s,wgc64x64x64s6k2s,'
             'wgc64x64x64s6k4s,wgc64x64x64s6k8s,wgc64x128x64s6k4s,wg64x128x64s8v,mma64x64x32w2x2s4,'
             'mma64x64x32w2x2s4k8',
}
tuned = {}  # (batch, layer index) -> (config, ms)


def step_tune():
    for B in sorted(BATCHES, reverse=True):
        path, layers = layers_graph(B)
        env = {'KFUSE_TUNE_FILE': TUNE, 'KFUSE_TUNE_CANDIDATES': os.environ.get(
            'CONV_TUNE_CANDIDATES', CANDS['large' if B >= 8 else 'small'])}
        rc, out, dt = kfrun([path, '--backend=cuda', '--random-inputs', '--tune=force', '--compare=cpu', '--rtol',
                             '2e-2', '--atol', '2e-2', '--bench', '20', '--profile'], env, timeout=900)
        log('tune-b%d.txt' % B, out)
        # the candidates of each key, fastest first; keys in layer order
        cands, keys = {}, []
        for m in re.finditer(r'^tune: (\S+) (\S+)\s+([0-9.]+) ms$', out, re.M):
            if m.group(1) not in cands:
                keys.append(m.group(1))
            cands.setdefault(m.group(1), []).append((float(m.group(3)), m.group(2)))
        for i, key in enumerate(keys):
            v = sorted(cands[key])
            tuned[(B, i)] = (v[0][1], v[0][0])
            print('%s: %s' % (key, '  '.join('%s %.4f' % (c, t) for t, c in v[:6])), flush=True)
        line = 'tune b%-3d %s: %d keys tuned, tuned graph %s ms (%.0f s)%s' % (
            B, 'ok' if rc == 0 else 'FAIL', len(cands), bench_ms(out), dt,
            '' if rc == 0 else ': ' + out.strip().splitlines()[-1][:150])
        print(line, flush=True)
        summary.append(line)


def step_e2e():
    import numpy as np
    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval().half().to('cuda')
    for B in BATCHES:
        x = torch.randn(B, 3, 224, 224, device='cuda', dtype=torch.float16)
        base = os.path.join(OUT, 'resnet50_b%d' % B)
        with torch.no_grad():
            y = model(x)
            cb.export(model, x, base + '.onnx')
        np.save(base + '.x.npy', x.cpu().numpy())
        np.save(base + '.y.npy', y.float().cpu().numpy())
        rc, out = cb.sh([cb.IMPORT, base + '.onnx', '-o', base + '.kf'])
        if rc == 0:
            rc, out = cb.sh([cb.OPT, base + '.kf', '-p', cb.PIPE, '-o', base + '.opt.kf'])
        if rc != 0:
            summary.append('e2e b%d: import/opt failed: %s' % (B, out[-300:]))
            continue
        for name, env, extra in (('default', {'KFUSE_TUNE_FILE': os.path.join(OUT, 'none.txt'),
                                              'KFUSE_TUNE_SHIPPED': '0'}, []),
                                 ('tuned', {'KFUSE_TUNE_FILE': TUNE}, []),
                                 ('tuned-profile', {'KFUSE_TUNE_FILE': TUNE}, ['--profile'])):
            rc, out, dt = kfrun([base + '.opt.kf', '--backend=cuda', '--input', 'x=%s.x.npy' % base, '--expect',
                                 '0=%s.y.npy' % base, '--l2', '1e-2', '--bench', '50'] + extra, env)
            log('e2e-b%d-%s.txt' % (B, name), out)
            m = re.search(r'(\d+) kernels', out)
            line = 'e2e resnet50 b%-3d %-14s %-4s %s ms, %s kernels (%.0f s)%s' % (
                B, name, 'ok' if rc == 0 else 'FAIL', bench_ms(out), m.group(1) if m else '?', dt,
                '' if rc == 0 else ': ' + out.strip().splitlines()[-1][:150])
            print(line, flush=True)
            summary.append(line)


def step_e2etune():
    """ResNet-50's own convs tuned (their keys, residual epilogues too:
    lines for cuda/tune_h200.txt), after the e2e step made the graphs;
    then timed with that table."""
    for B in BATCHES:
        base = os.path.join(OUT, 'resnet50_b%d' % B)
        env = {'KFUSE_TUNE_FILE': os.path.join(OUT, 'tune-e2e.txt'), 'KFUSE_TUNE_CANDIDATES': os.environ.get(
            'CONV_TUNE_CANDIDATES', CANDS['large' if B >= 8 else 'small'])}
        rc, out, dt = kfrun([base + '.opt.kf', '--backend=cuda', '--input', 'x=%s.x.npy' % base, '--expect',
                             '0=%s.y.npy' % base, '--l2', '1e-2', '--tune=force', '--bench', '50'], env, timeout=900)
        log('e2etune-b%d.txt' % B, out)
        line = 'e2e resnet50 b%-3d %-14s %-4s %s ms (%.0f s)%s' % (
            B, 'own-tuned', 'ok' if rc == 0 else 'FAIL', bench_ms(out), dt,
            '' if rc == 0 else ': ' + out.strip().splitlines()[-1][:150])
        print(line, flush=True)
        summary.append(line)


def step_cudnn():
    """cuDNN (PyTorch eager, channels last) + a separate ReLU per layer,
    beside the tuned kernel's time (the tuner's median of back-to-back
    launches; do_bench's median for PyTorch)."""
    import torch
    print('\n%-3s %-5s %-40s %-22s %9s %9s %7s' % ('l', 'batch', 'layer', 'kfuse tuned', 'ms', 'cudnn+epi', 'ratio'))
    fast = n = 0
    for B in BATCHES:
        for i, (C, O, k, s, p, d, g, H, W) in enumerate(cb.layers_of('resnet50')):
            f, x, w, b = cb.torch_layer(B, C, O, k, s, p, d, g, H, W)
            with torch.no_grad():
                t = cb.do_bench(lambda: f(x, w, b))
            cfg, ms = tuned.get((B, i), ('-', None))
            r = t / ms if ms else None
            if r:
                n += 1
                fast += r >= 1.0
            line = '%-3d %-5d %-40s %-22s %9s %9.4f %7s' % (
                i, B, '%d>%d %dx%d /%d %dx%d' % (C, O, k[0], k[1], s[0], H, W), cfg,
                '%.4f' % ms if ms else '-', t, '%.2fx' % r if r else '-')
            print(line, flush=True)
            summary.append(line)
    summary.append('tuned kernels at least as fast as cuDNN + ReLU: %d of %d' % (fast, n))


if __name__ == '__main__':
    t0 = time.time()
    for st in STEPS:
        try:
            {'check': step_check, 'tune': step_tune, 'e2e': step_e2e, 'cudnn': step_cudnn,
             'e2etune': step_e2etune}[st]()
        except Exception as e:  # a failing step is a line; the others go on
            summary.append('%s: %s' % (st, e))
    print('\n== conv_tune summary (%.0f s) ==' % (time.time() - t0))
    for line in summary:
        print(line)
