#!/usr/bin/env python3
"""Real CNNs from torchvision (random weights, seeded), exported to ONNX by
PyTorch, imported by kfuse, optimised, run on the interpreter and compared
with PyTorch's own output.

    torch_models.py MODEL BUILD_DIR WORK_DIR [--pipeline P] [--max-cpu-seconds S]

MODEL is one of the names in MODELS.  Exits 77 (a skip) when this python has
no torch/torchvision.  --max-cpu-seconds fails the test when kfuse-run (the
weights read, a run and a timed run) takes more CPU time, summed over its
threads: CPU time, because wall time on a shared machine measures the other
jobs.
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import time


def sample_net(torch, nn, F):
    """Grouped, depthwise, dilated, strided and transposed convolutions,
    ceil-mode pools, a standalone batch norm after a concat, residuals."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(8)
            self.grouped = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=4)
            self.dw = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16)
            self.pw = nn.Conv2d(16, 8, 1)
            self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
            self.bcat = nn.BatchNorm2d(20)
            self.c1d = nn.Conv1d(20, 6, 3, stride=2, padding=1, dilation=1)
            self.c3d = nn.Conv3d(1, 2, (1, 3, 3), padding=(0, 1, 1))

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            z = F.hardswish(self.grouped(y))
            z = z + self.dw(z)
            w = F.max_pool2d(z, 3, stride=2, ceil_mode=True)
            w = F.avg_pool2d(w, 2, stride=1, padding=1, count_include_pad=False)
            w = w + F.avg_pool2d(w, 3, stride=1, padding=1, ceil_mode=True, count_include_pad=False)
            u = self.up(self.pw(w))[:, :, :z.shape[2], :z.shape[3]]
            c = self.bcat(torch.cat([z, u], 1))
            # (count_include_pad = True exports as Pad + AveragePool)
            d = F.avg_pool2d(c, 3, stride=2, padding=1, count_include_pad=False)
            e = self.c1d(d.mean(3))
            f = self.c3d(d[:, :1].unsqueeze(1))
            return e, f
    return Net()


def build(name, torch, torchvision):
    nn, F = torch.nn, torch.nn.functional
    tm = torchvision.models
    models = {
        'resnet18': (lambda: tm.resnet18(), [1, 3, 64, 64], {}),
        # batch norms kept as BatchNormalization nodes (the exporter folds
        # them into the convs in eval mode), for the folding rules
        'resnet18-bn': (lambda: tm.resnet18(), [1, 3, 64, 64], {'training': torch.onnx.TrainingMode.PRESERVE}),
        'mobilenet_v2': (lambda: tm.mobilenet_v2(), [1, 3, 64, 64], {}),
        'regnet_y_400mf': (lambda: tm.regnet_y_400mf(), [2, 3, 32, 32], {}),
        'efficientnet_b0': (lambda: tm.efficientnet_b0(), [1, 3, 32, 32], {}),
        'mobilenet_v3_small': (lambda: tm.mobilenet_v3_small(), [1, 3, 64, 64], {}),
        'convnext_tiny': (lambda: tm.convnext_tiny(), [1, 3, 32, 32], {}),
        'sample': (lambda: sample_net(torch, nn, F), [2, 3, 24, 20], {'training': torch.onnx.TrainingMode.PRESERVE}),
        'resnet50': (lambda: tm.resnet50(), [1, 3, 224, 224], {}),
    }
    make, shape, kw = models[name]
    torch.manual_seed(0)
    m = make().eval()
    # running statistics that are not the identity, so a wrong fold shows
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m, torch.randn(*shape), kw


MODELS = ['resnet18', 'resnet18-bn', 'mobilenet_v2', 'regnet_y_400mf', 'efficientnet_b0', 'mobilenet_v3_small',
          'convnext_tiny', 'sample', 'resnet50']


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print('$ ' + ' '.join(cmd))
    print(p.stdout[-3000:], end='')
    if p.returncode != 0:
        sys.exit('FAIL: exit status %d' % p.returncode)
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('model', choices=MODELS)
    ap.add_argument('build')
    ap.add_argument('work')
    ap.add_argument('--pipeline', default='canonicalize,cse,rules{path=%s},canonicalize,cse,layout,pad-channels,canonicalize,'
                    'cse,fuse-conv,fuse,dce' % os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                                                            'patterns'))
    ap.add_argument('--count', action='append', default=[],
                    help='TEXT=N: N top-level nodes of the optimised graph start with TEXT after the "="')
    ap.add_argument('--max-cpu-seconds', type=float, default=0)
    ap.add_argument('--rtol', default='1e-3')
    ap.add_argument('--atol', default='1e-3')
    a = ap.parse_args()
    try:
        import numpy as np
        import torch
        import torchvision
    except ImportError as e:
        print('skipped: this python has no %s' % e.name)
        return 77
    torch.set_num_threads(2)
    import warnings
    warnings.filterwarnings('ignore')  # the exporter's advice on constant folding
    os.makedirs(a.work, exist_ok=True)
    base = os.path.join(a.work, a.model)
    m, x, kw = build(a.model, torch, torchvision)
    with torch.no_grad():
        ys = m(x)
    ys = ys if isinstance(ys, tuple) else (ys,)
    t0 = time.time()
    torch.onnx.export(m, x, base + '.onnx', opset_version=17, input_names=['x'], **kw)
    print('exported %s in %.1f s' % (a.model, time.time() - t0))
    np.save(base + '.x.npy', x.numpy())
    for i, y in enumerate(ys):
        np.save('%s.y%d.npy' % (base, i), y.numpy())
    b = a.build
    run([os.path.join(b, 'onnx', 'kfuse-import-onnx'), base + '.onnx', '-o', base + '.kf'])
    out = run([os.path.join(b, 'kfuse-opt'), base + '.kf', '-p', a.pipeline, '--verify-each', '--timing',
               '-o', base + '.opt.kf'])
    cmd = [os.path.join(b, 'kfuse-run'), base + '.opt.kf', '--input', 'x=%s.x.npy' % base,
           '--rtol', a.rtol, '--atol', a.atol, '--bench', '1']
    for i in range(len(ys)):
        cmd += ['--expect', '%d=%s.y%d.npy' % (i, base, i)]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    out = run(cmd)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print('kfuse-run: %.2f s of CPU time, %.2f s wall' % (cpu, time.time() - t0))
    with open(base + '.opt.kf') as f:
        text = f.read()
    print('after the pipeline: %d conv kernels, %d other kernels, %d transposes at the top level' % tuple(
        len(re.findall(r'^  %%[^ ]+ = %s' % op, text, re.M)) for op in ('fusion @c', 'fusion @[^c]', 'transpose')))
    for c in a.count:
        op, n = c.rsplit('=', 1)
        got = len(re.findall(r'^  %%[^ ]+ = %s' % re.escape(op), text, re.M))
        print('%d top-level nodes start with "%s"' % (got, op))
        if got != int(n):
            sys.exit('FAIL: %d nodes start with "%s" after the pipeline, expected %s' % (got, op, n))
    if a.max_cpu_seconds and cpu > a.max_cpu_seconds:
        sys.exit('FAIL: kfuse-run took %.1f s of CPU time, over the limit of %g s' % (cpu, a.max_cpu_seconds))
    return 0


if __name__ == '__main__':
    sys.exit(main())
