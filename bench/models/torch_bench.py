#!/usr/bin/env python3
"""torch_bench.py: PyTorch's times for the zoo's full-size models, in one
process: eager, torch.compile and torch.compile(mode="reduce-overhead"),
per dtype, each the median of REPS CUDA-event-timed runs after a few
warm-up runs (the compiles happen in the warm-up).  The models are zoo.py's
builders with its seeds, so they are the ones gpu.sh exported.

    torch_bench.py --configs resnet50:1,bert:8:512 [--dtypes f16,f32]
                   [--modes eager,compile,reduce-overhead] [--reps 30] [--hf] [--tf32]

One JSON line per (config, dtype, mode) on stdout: {"model", "batch",
"seq", "dtype", "mode", "ms"} or, when it failed, "error" instead of "ms".
"""
import argparse
import json
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

warnings.filterwarnings("ignore")


def median_ms(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


class Cfg:
    def __init__(self, batch, seq, hf):
        self.full, self.batch, self.seq, self.hf, self.seed = True, batch, seq, hf, 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", required=True, help="name:batch[:seq[:hand]],...")
    ap.add_argument("--dtypes", default="f16,f32")
    ap.add_argument("--modes", default="eager,compile,reduce-overhead")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--hf", action="store_true")
    ap.add_argument("--tf32", action="store_true", help="f32 with torch.backends' allow_tf32 (matmuls, cuDNN)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    for spec in a.configs.split(","):
        parts = spec.split(":")
        name, batch, seq = parts[0], int(parts[1]), int(parts[2] or 0) if len(parts) > 2 else 0
        # ":hand": the export fell back to the hand-written model; time that one
        hf = a.hf and "hand" not in parts[3:]
        for dt in a.dtypes.split(","):
            dtype = torch.float16 if dt == "f16" else torch.float32
            row = {"model": name, "batch": batch, "seq": seq, "dtype": dt}
            try:
                torch.manual_seed(0)
                e = zoo.ZOO[name](Cfg(batch, seq, hf))
                model = e.model.eval().cuda().to(dtype)
                xs = zoo.to_dtype([x.cuda() for x in e.inputs], dtype)
            except Exception as err:  # noqa: BLE001 -- one row says why, the rest go on
                for mode in a.modes.split(","):
                    print(json.dumps(dict(row, mode=mode, error=f"build: {type(err).__name__}: {err}"[:300])),
                          flush=True)
                continue
            for mode in a.modes.split(","):
                try:
                    torch._dynamo.reset() if hasattr(torch, "_dynamo") else None
                    m = model if mode == "eager" else torch.compile(
                        model, mode="reduce-overhead" if mode == "reduce-overhead" else None)
                    t0 = time.time()
                    with torch.no_grad():
                        ms = median_ms(lambda: m(*xs), a.reps, 3 if mode == "eager" else 5)
                    print(json.dumps(dict(row, mode=mode, ms=ms, wall_s=round(time.time() - t0, 1))), flush=True)
                except Exception as err:  # noqa: BLE001
                    print(json.dumps(dict(row, mode=mode, error=f"{type(err).__name__}: {err}"[:300])), flush=True)
            del model
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
