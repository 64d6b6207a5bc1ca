"""timing.py: the median device time of a function, shared by the bench
scripts: Triton's do_bench when Triton is there, else CUDA events by hand."""
import torch

try:
    from triton.testing import do_bench
except ImportError:  # CUDA events by hand
    def do_bench(fn, warmup=25, rep=100, return_mode="median"):
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(100):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e))
        ts.sort()
        return ts[len(ts) // 2]
