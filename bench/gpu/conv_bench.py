#!/usr/bin/env python3
"""bench/gpu/conv_bench.py BUILD OUT: the conv benchmark of bench/gpu/conv.sh.

1. Every distinct conv layer of ResNet-50, MobileNetV2 and ConvNeXt-T
   (torchvision, 224x224 input, shapes found by forward hooks), at batch 1
   and 32, fp16 channels-last, as kfuse runs it: one `fusion {kind = "conv"}`
   of conv + bias + ReLU (cuda/emit_conv.c: the implicit GEMM, or the
   direct kernel for depthwise/grouped convs).  Each is checked first:
   against the CPU interpreter (batch 1: kfuse-run --compare=cpu) and
   against PyTorch's output (both batches: --expect); then timed
   (kfuse-run --bench: median of CUDA-graph replays) beside PyTorch:
   cuDNN's conv with the bias, then ReLU as its own kernel ("cudnn+epi",
   channels_last), and torch.compile of the same function.
2. ResNet-50 end to end, fp16, batch 1 and 32: exported by PyTorch,
   imported, through the CNN pipeline (docs/conv.md), run by kfuse-run
   --backend=cuda and checked against PyTorch's output; timed beside torch
   eager, torch.compile and torch.compile(mode="reduce-overhead"), each
   with and without channels_last.

Every failure is reported in its row and the script goes on.  The table
goes to stdout and OUT/conv-results.txt.  Environment: CONV_N (timed runs,
default 30), CONV_COMPILE=0 (skip torch.compile per layer: it compiles
each shape), CONV_MODELS (comma list of resnet50,mobilenet_v2,convnext_tiny;
empty: no layers), CONV_BATCHES (default 1,32), CONV_E2E=0 (skip part 2),
CONV_E2E_MODELS (default resnet50), CONV_E2E_MODES (default
compile,reduce-overhead: the torch.compile modes timed end to end, eager
always), CONV_LIMIT (layers per model, for a quick try).
"""
import json
import os
import re
import subprocess
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import do_bench  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PIPE = ('canonicalize,cse,rules{path=%s/patterns},canonicalize,cse,layout,pad-channels,canonicalize,cse,'
        'fuse-conv,fuse-matmul,fuse,dce' % ROOT)
N = int(os.environ.get('CONV_N', '30'))
COMPILE = os.environ.get('CONV_COMPILE', '1') != '0'
MODELS = [m for m in os.environ.get('CONV_MODELS', 'resnet50,mobilenet_v2,convnext_tiny').split(',') if m]
E2E_MODES = os.environ.get('CONV_E2E_MODES', 'compile,reduce-overhead').split(',')
BATCHES = [int(b) for b in os.environ.get('CONV_BATCHES', '1,32').split(',')]
LIMIT = int(os.environ.get('CONV_LIMIT', '0'))
dev = 'cuda'
torch.backends.cudnn.benchmark = True
BUILD = OUT = RUN = OPT = IMPORT = results = None


def setup(build, out):
    """The build's tools and the results file (conv_tune.py imports this
    module and calls it too)."""
    global BUILD, OUT, RUN, OPT, IMPORT, results
    BUILD, OUT = build, out
    RUN = os.path.join(BUILD, 'kfuse-run')
    OPT = os.path.join(BUILD, 'kfuse-opt')
    IMPORT = os.path.join(BUILD, 'onnx', 'kfuse-import-onnx')
    results = open(os.path.join(OUT, 'conv-results.txt'), 'a')


def say(line):
    print(line, flush=True)
    results.write(line + '\n')
    results.flush()


def sh(cmd, timeout=600):
    """(rc, output) of a command; never raises."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or '') + '\n(timed out)'


def bench_ms(out):
    m = re.search(r'bench cuda @\S+: \d+ runs, median ([0-9.]+) ms', out)
    return float(m.group(1)) if m else None


# ---- the layers ------------------------------------------------------------------------

def layers_of(name):
    """Distinct (C, O, k, s, p, d, g, H, W) of the model's Conv2d layers."""
    m = getattr(torchvision.models, name)().eval()
    seen, order = set(), []

    def hook(mod, inp, out):
        x = inp[0]
        key = (mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding, mod.dilation,
               mod.groups, x.shape[2], x.shape[3])
        if key not in seen:
            seen.add(key)
            order.append(key)
    hs = [mod.register_forward_hook(hook) for mod in m.modules() if isinstance(mod, torch.nn.Conv2d)]
    with torch.no_grad():
        m(torch.randn(1, 3, 224, 224))
    for h in hs:
        h.remove()
    return order[:LIMIT] if LIMIT else order


def out_hw(H, k, s, p, d):
    return (H + 2 * p - d * (k - 1) - 1) // s + 1


def layer_parts(i, B, C, O, k, s, p, d, g, H, W):
    """Layer i's conv + bias + ReLU kernel: its inputs (x<i>, w<i>, b<i>)
    as graph arguments, its fusion (result y<i>), the result's type."""
    OH, OW = out_hw(H, k[0], s[0], p[0], d[0]), out_hw(W, k[1], s[1], p[1], d[1])
    xt, wt = 'f16[%d,%d,%d,%d]' % (B, H, W, C), 'f16[%d,%d,%d,%d]' % (O, k[0], k[1], C // g)
    yt, bt = 'f16[%d,%d,%d,%d]' % (B, OH, OW, O), 'f16[%d]' % O
    attrs = 'channels_last = true, dilations = [%d, %d], group = %d, pads = [%d, %d, %d, %d], strides = [%d, %d]' % (
        d[0], d[1], g, p[0], p[1], p[0], p[1], s[0], s[1])
    args = '%%x%s: %s, %%w%s: %s, %%b%s: %s' % (i, xt, i, wt, i, bt)
    fus = ('  %%y%s = fusion @c%s(%%x%s, %%w%s, %%b%s) {kind = "conv"} : %s {\n'
           '  ^(%%0: %s, %%1: %s, %%2: %s):\n'
           '    %%c = conv(%%0, %%1, %%2) {%s} : %s\n'
           '    %%r = relu(%%c) : %s\n    yield %%r\n  }\n'
           % (i, i, i, i, i, yt, xt, wt, bt, attrs, yt, yt))
    return args, fus, yt, (OH, OW)


def layer_kf(tag, B, C, O, k, s, p, d, g, H, W):
    """The channels-last conv + bias + ReLU kernel of one layer, as text."""
    args, fus, yt, ohw = layer_parts('', B, C, O, k, s, p, d, g, H, W)
    return 'graph @%s(%s) -> (%s) {\n%s  return %%y\n}\n' % (tag, args, yt, fus), ohw


def padded(C, g):
    """Whether pad-channels pads the input of this f16 conv (channels not
    in 16-byte runs: the stem's 3)."""
    return g == 1 and C % 8 != 0


def layer_kf_padded(tag, wfile, B, C, O, k, s, p, d, g, H, W):
    """A layer whose channels pad-channels pads, before the pipeline: the
    conv and ReLU unfused, the weight a file constant (its padding is then
    computed once when the GPU plans; the input's is a kernel, timed with
    the conv's).  Inputs x and b."""
    OH, OW = out_hw(H, k[0], s[0], p[0], d[0]), out_hw(W, k[1], s[1], p[1], d[1])
    xt, wt = 'f16[%d,%d,%d,%d]' % (B, H, W, C), 'f16[%d,%d,%d,%d]' % (O, k[0], k[1], C // g)
    yt, bt = 'f16[%d,%d,%d,%d]' % (B, OH, OW, O), 'f16[%d]' % O
    attrs = 'channels_last = true, dilations = [%d, %d], group = %d, pads = [%d, %d, %d, %d], strides = [%d, %d]' % (
        d[0], d[1], g, p[0], p[1], p[0], p[1], s[0], s[1])
    return ('graph @%s(%%x: %s, %%b: %s) -> (%s) {\n  %%w = const file("%s") : %s\n'
            '  %%c = conv(%%x, %%w, %%b) {%s} : %s\n  %%y = relu(%%c) : %s\n  return %%y\n}\n'
            % (tag, xt, bt, yt, wfile, wt, attrs, yt, yt)), (OH, OW)


def copy_gbs():
    """The device's copy bandwidth, measured as the depthwise bar's
    ceiling: read and write of 1 GiB of f16."""
    a = torch.empty(1 << 29, device=dev, dtype=torch.float16)
    b = torch.empty_like(a)
    ms = do_bench(lambda: b.copy_(a))
    del a, b
    return 2.0 * (1 << 30) / (ms * 1e-3) / 1e9


def torch_layer(B, C, O, k, s, p, d, g, H, W):
    x = torch.randn(B, C, H, W, device=dev, dtype=torch.float16).to(memory_format=torch.channels_last)
    w = (torch.randn(O, C // g, k[0], k[1], device=dev, dtype=torch.float16) / (C // g * k[0] * k[1]) ** 0.5)
    w = w.to(memory_format=torch.channels_last)
    b = torch.randn(O, device=dev, dtype=torch.float16)

    def f(x, w, b):
        return F.relu(F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=g))
    return f, x, w, b


def run_layers():
    say('\n== conv layers, fp16, channels-last: kfuse (conv + bias + ReLU, one kernel) beside cuDNN + '
        'a separate ReLU (PyTorch eager) and torch.compile; median ms ==')
    say('%-14s %-3s %-46s %5s %-10s %9s %9s %9s %7s %s' % ('model', 'b', 'layer (C>O kxk /s pad dil grp HxW)',
                                                            'batch', 'check', 'kfuse', 'cudnn+epi', 'compile',
                                                            'ratio', 'note'))
    ratios, dw = [], []
    copy = copy_gbs()
    say('copy ceiling (torch copy_ of 1 GiB, f16): %.0f GB/s; depthwise rows note GB/s = (x + w + y bytes) / kfuse time'
        % copy)
    for mname in MODELS:
        try:
            layers = layers_of(mname)
        except Exception as e:
            say('%s: cannot list its layers: %s' % (mname, e))
            continue
        for li, (C, O, k, s, p, d, g, H, W) in enumerate(layers):
            desc = '%d>%d %dx%d /%d p%d d%d g%d %dx%d' % (C, O, k[0], k[1], s[0], p[0], d[0], g, H, W)
            for B in BATCHES:
                row = dict(model=mname, layer=li, desc=desc, batch=B)
                note = []
                try:
                    tag = '%s_l%d_b%d' % (mname, li, B)
                    base = os.path.join(OUT, tag)
                    pad = padded(C, g)
                    if pad:  # the pipeline's pad-channels, then fuse-conv, as a model gets it
                        text, (OH, OW) = layer_kf_padded(tag, os.path.basename(base) + '.w.npy', B, C, O, k, s, p,
                                                         d, g, H, W)
                    else:
                        text, (OH, OW) = layer_kf(tag, B, C, O, k, s, p, d, g, H, W)
                    with open(base + '.kf', 'w') as fh:
                        fh.write(text)
                    f, x, w, b = torch_layer(B, C, O, k, s, p, d, g, H, W)
                    with torch.no_grad():
                        y = f(x, w, b)
                    np.save(base + '.x.npy', x.permute(0, 2, 3, 1).contiguous().cpu().numpy())
                    np.save(base + '.w.npy', w.permute(0, 2, 3, 1).contiguous().cpu().numpy())
                    np.save(base + '.b.npy', b.cpu().numpy())
                    np.save(base + '.y.npy', y.permute(0, 2, 3, 1).contiguous().cpu().numpy())
                    rc, out = 0, ''
                    if pad:
                        rc, out = sh([OPT, base + '.kf', '-p', 'pad-channels,fuse-conv,fuse,dce', '-o',
                                      base + '.opt.kf'])
                        note.append('x padded to %d channels by a kernel' % ((C + 7) // 8 * 8))
                    cmd = [RUN, base + ('.opt.kf' if pad else '.kf'), '--backend=cuda', '--input',
                           'x=%s.x.npy' % base, '--input', 'b=%s.b.npy' % base, '--expect', '0=%s.y.npy' % base,
                           '--rtol', '2e-2', '--atol', '2e-2', '--bench', str(N)]
                    if not pad:
                        cmd += ['--input', 'w=%s.w.npy' % base]
                    if B == 1:
                        cmd.append('--compare=cpu')
                    if rc == 0:
                        rc, out = sh(cmd)
                    row['check'] = 'ok' if rc == 0 else 'FAIL'
                    row['kfuse'] = bench_ms(out)
                    if rc != 0:
                        note.append(out.strip().splitlines()[-1][:100] if out.strip() else 'rc %d' % rc)
                    row['cudnn'] = do_bench(lambda: f(x, w, b))
                    if COMPILE:
                        try:
                            fc = torch.compile(f)
                            fc(x, w, b)
                            row['compile'] = do_bench(lambda: fc(x, w, b))
                        except Exception as e:
                            note.append('compile: %s' % str(e)[:60])
                except Exception as e:
                    row['check'] = 'ERROR'
                    note.append(str(e)[:100])
                    traceback.print_exc()
                kf, cu = row.get('kfuse'), row.get('cudnn')
                ratio = cu / kf if kf and cu else None
                if ratio:
                    ratios.append((ratio, row['check'] == 'ok', g == C))
                if g == C and kf and row.get('check') == 'ok':
                    # a depthwise conv is memory-bound: x, w and y each cross memory once at best
                    OH, OW = out_hw(H, k[0], s[0], p[0], d[0]), out_hw(W, k[1], s[1], p[1], d[1])
                    gbs = 2.0 * (B * H * W * C + O * k[0] * k[1] + O + B * OH * OW * O) / (kf * 1e-3) / 1e9
                    dw.append((B, gbs / copy))
                    note.append('%.0f GB/s, %.0f%% of copy' % (gbs, 100.0 * gbs / copy))
                fmt = lambda v: '%9.4f' % v if v else '%9s' % '-'
                say('%-14s %-3d %-46s %5d %-10s %s %s %s %7s %s' % (
                    mname, li, desc, B, row.get('check', '?'), fmt(kf), fmt(cu), fmt(row.get('compile')),
                    '%.2fx' % ratio if ratio else '-', '; '.join(note)))
                results.write(json.dumps(row) + '\n')
    if ratios:
        ok = [r for r, good, _ in ratios if good]
        fast = sum(1 for r in ok if r >= 1.0)
        say('\nlayers checked and timed: %d; kfuse at least as fast as cuDNN + separate ReLU in %d (%.0f%%; the bar '
            'is 90%%)' % (len(ok), fast, 100.0 * fast / max(len(ok), 1)))
    for B in BATCHES:
        f = [r for b, r in dw if b == B]
        if f:
            say('depthwise layers, batch %d: %d, at 80%% of copy or more: %d (lowest %.0f%%, median %.0f%%)' % (
                B, len(f), sum(1 for r in f if r >= 0.8), 100 * min(f), 100 * sorted(f)[len(f) // 2]))


# ---- ResNet-50 end to end -----------------------------------------------------------------------

def export(m, x, path):
    """ONNX by the TorchScript exporter where this PyTorch has it, else by
    its default exporter (opset 18 there: the importer reads both)."""
    try:
        torch.onnx.export(m, x, path, opset_version=17, input_names=['x'], dynamo=False)
    except Exception as e:
        say('(the TorchScript exporter failed: %s; exporting with the default)' % str(e)[:100])
        torch.onnx.export(m, (x,), path, input_names=['x'])


def run_e2e(name='resnet50'):
    say('\n== %s end to end, fp16: kfuse (CNN pipeline, CUDA graph) beside PyTorch; median ms ==' % name)
    say('%-6s %-10s %9s %9s %9s %9s %9s %9s %9s  %s' % ('batch', 'check', 'kfuse', 'eager', 'eager_cl', 'compile',
                                                         'compile_cl', 'ro', 'ro_cl', 'note'))
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().eval().half().to(dev)
    for B in BATCHES:
        row, note = {}, []
        try:
            x = torch.randn(B, 3, 224, 224, device=dev, dtype=torch.float16)
            base = os.path.join(OUT, '%s_b%d' % (name, B))
            with torch.no_grad():
                y = model(x)
                export(model, x, base + '.onnx')
            np.save(base + '.x.npy', x.cpu().numpy())
            np.save(base + '.y.npy', y.float().cpu().numpy())
            rc, out = sh([IMPORT, base + '.onnx', '-o', base + '.kf'])
            if rc == 0:
                rc, out = sh([OPT, base + '.kf', '-p', PIPE, '-o', base + '.opt.kf'])
            if rc == 0:
                rc, out = sh([RUN, base + '.opt.kf', '--backend=cuda', '--input', 'x=%s.x.npy' % base,
                              '--expect', '0=%s.y.npy' % base, '--l2', '1e-2',
                              '--bench', str(max(N, 50))])
            row['check'] = 'ok' if rc == 0 else 'FAIL'
            row['kfuse'] = bench_ms(out)
            m = re.search(r'(\d+) kernels', out)
            if m:
                note.append('%s kernels' % m.group(1))
            if rc != 0:
                note.append(out.strip().splitlines()[-1][:120] if out.strip() else 'rc %d' % rc)
                say(out[-3000:])
            with torch.no_grad():
                for cl in (False, True):
                    mm = model.to(memory_format=torch.channels_last) if cl else model.to(
                        memory_format=torch.contiguous_format)
                    xx = x.to(memory_format=torch.channels_last) if cl else x
                    sfx = '_cl' if cl else ''
                    row['eager' + sfx] = do_bench(lambda: mm(xx))
                    for mode, key in ((None, 'compile'), ('reduce-overhead', 'ro')):
                        if (mode or 'compile') not in E2E_MODES:
                            continue
                        try:
                            torch._dynamo.reset()
                            mc = torch.compile(mm, mode=mode) if mode else torch.compile(mm)
                            for _ in range(3):
                                mc(xx)
                            row[key + sfx] = do_bench(lambda: mc(xx))
                        except Exception as e:
                            note.append('%s%s: %s' % (key, sfx, str(e)[:60]))
        except Exception as e:
            row['check'] = 'ERROR'
            note.append(str(e)[:120])
            traceback.print_exc()
        fmt = lambda v: '%9.4f' % v if v else '%9s' % '-'
        say('%-6d %-10s %s %s %s %s %s %s %s  %s' % (B, row.get('check', '?'), fmt(row.get('kfuse')),
                                                       fmt(row.get('eager')), fmt(row.get('eager_cl')),
                                                       fmt(row.get('compile')), fmt(row.get('compile_cl')),
                                                       fmt(row.get('ro')), fmt(row.get('ro_cl')), '; '.join(note)))
        results.write(json.dumps(dict(model=name, batch=B, **row)) + '\n')
    say('(the bar, fp16 on the H200: batch 1 at most 0.42 ms, batch 32 at most 1.43 ms; ro = '
        'torch.compile(mode="reduce-overhead"), _cl = channels_last)')


if __name__ == '__main__':
    setup(sys.argv[1], sys.argv[2])
    say('conv_bench: %s, torch %s, torchvision %s, %s' % (time.strftime('%Y-%m-%d %H:%M'), torch.__version__,
                                                          torchvision.__version__, torch.cuda.get_device_name()))
    t0 = time.time()
    try:
        run_layers()
    except Exception:
        traceback.print_exc()
    if os.environ.get('CONV_E2E', '1') != '0':
        for name in os.environ.get('CONV_E2E_MODELS', 'resnet50').split(','):
            try:
                run_e2e(name)
            except Exception:
                traceback.print_exc()
    say('conv_bench: %.0f s' % (time.time() - t0))
