"""autocast_err.py: how far PyTorch's own autocast is from its f32 result on
the zoo's small configurations (the data of tests/models/zoo), as the
relative L2 error per output that kfuse's models-amp CTests measure for
amp{dtype=bf16}: the yardstick docs/amp.md puts beside kfuse's.

    /usr/bin/python3 bench/models/autocast_err.py [--dtype bf16] [--only a,b]

Each model is rebuilt as zoo.py builds it (same seed, so the same weights),
run on the stored inputs (tests/models/zoo/NAME.in<i>.npy) in f32 and under
torch.autocast(device_type="cpu", dtype=...), and each output's
||autocast - f32|| / ||f32|| printed (a model whose f32 result is not
the stored one says so: its weights are not those of the export).  CPU autocast in torch 1.13 knows
bf16 only; f16 needs a GPU (--device cuda).
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "tests", "models", "zoo"))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    cfg = argparse.Namespace(full=False, dtype="f32", device=a.device, batch=0, seq=0, seed=0, hf=False)
    names = [n for n in (a.only.split(",") if a.only else zoo.ZOO) if n]
    for n in names:
        torch.manual_seed(cfg.seed)
        e = zoo.ZOO[n](cfg)
        model = e.model.eval().to(a.device)
        ins, i = [], 0
        while os.path.exists(os.path.join(a.data, f"{n}.in{i}.npy")):
            ins.append(torch.from_numpy(np.load(os.path.join(a.data, f"{n}.in{i}.npy"))).to(a.device))
            i += 1
        with torch.no_grad():
            want = zoo.run(model, ins)
            try:
                with torch.autocast(device_type=a.device.split(":")[0], dtype=dt):
                    got = zoo.run(model, ins)
            except RuntimeError as err:  # torch 1.13's CPU autocast fails some models: reported, not fatal
                print(f"{n}\t{a.dtype}\tautocast fails: {str(err).splitlines()[0]}", flush=True)
                continue
        # the model rebuilt is the one exported: its f32 output is the stored one
        same = all(np.allclose(w.cpu().numpy(), np.load(os.path.join(a.data, f"{n}.out{k}.npy")), 1e-4, 1e-5)
                   for k, w in enumerate(want))
        errs = []
        for w, g in zip(want, got):
            w, g = w.double(), g.double()
            errs.append("%.3g" % (float((g - w).norm() / w.norm()) if float(w.norm()) else 0.0))
        print(f"{n}\t{a.dtype}\t" + " ".join(errs) + ("" if same else "\t(f32 differs from the stored output)"),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
