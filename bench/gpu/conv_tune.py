#!/usr/bin/env python3
"""bench/gpu/conv_tune.py BUILD OUT: the conv kernels' variants on the GPU,
for bench/gpu/conv_tune.sh (docs/conv.md, "Tuning").

Every distinct conv layer of ResNet-50 (conv_bench.py's list) at batch 1
and 32 goes into one graph per batch, each layer a conv + bias + ReLU
kernel with its own inputs.  Steps (CONV_TUNE_STEPS, default
check,tune,e2e):

  check  the graph on the GPU against the CPU interpreter (kfuse-run
         --compare=cpu), with the default configs and, at batch 1, with
         tiles forced by KFUSE_CONV_TILE (a tile a layer cannot take leaves
         its default);
  tune   kfuse-run --tune=force over it: every candidate of every layer
         timed (the report's "tune:" lines), the winners written to
         OUT/tune.txt (KFUSE_TUNE_FILE), then the tuned graph checked
         against the interpreter, timed (--bench) and profiled;
  e2e    ResNet-50 fp16 end to end (exported by PyTorch, imported, the CNN
         pipeline) checked against PyTorch and timed with the defaults
         (no tune file, no shipped table) and with OUT/tune.txt, profiled.

Each step's output goes to OUT/<step>-*.txt; a summary table last.
CONV_TUNE_CHECK_TILES: the forced tiles (comma list); CONV_BATCHES.
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
STEPS = os.environ.get('CONV_TUNE_STEPS', 'check,tune,e2e').split(',')
BATCHES = [int(b) for b in os.environ.get('CONV_BATCHES', '1,32').split(',')]
TILES = os.environ.get('CONV_TUNE_CHECK_TILES', 'wgc128x128x64s4s,wgc64x64x64s6k8s,wg128x128x64s4pvs').split(',')
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
    """OUT/layers_b<B>.kf: every distinct ResNet-50 layer at batch B."""
    layers = cb.layers_of('resnet50')
    args, body, outs, types = [], [], [], []
    for i, (C, O, k, s, p, d, g, H, W) in enumerate(layers):
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
        for tile in ['default'] + (TILES if B == 1 else []):
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


def step_tune():
    for B in sorted(BATCHES, reverse=True):
        path, layers = layers_graph(B)
        rc, out, dt = kfrun([path, '--backend=cuda', '--random-inputs', '--tune=force', '--compare=cpu', '--rtol',
                             '2e-2', '--atol', '2e-2', '--bench', '20', '--profile'], {'KFUSE_TUNE_FILE': TUNE},
                            timeout=900)
        log('tune-b%d.txt' % B, out)
        # the candidates of each key, fastest first
        cands = {}
        for m in re.finditer(r'^tune: (\S+) (\S+)\s+([0-9.]+) ms$', out, re.M):
            cands.setdefault(m.group(1), []).append((float(m.group(3)), m.group(2)))
        for key, v in cands.items():
            v.sort()
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


if __name__ == '__main__':
    t0 = time.time()
    for st in STEPS:
        try:
            {'check': step_check, 'tune': step_tune, 'e2e': step_e2e}[st]()
        except Exception as e:  # a failing step is a line; the others go on
            summary.append('%s: %s' % (st, e))
    print('\n== conv_tune summary (%.0f s) ==' % (time.time() - t0))
    for line in summary:
        print(line)
