"""The Python overhead of one CPU fsattn.bla_step call against the C call it makes.

    python bench/step_overhead.py [--iters N] [--repeats R]

At B=1, H=4, Dk=Dv=64, S=64 (M=31, W=256), per call, the median over R repeats of N calls:
  C            fsattn_bla_step from a C++ loop, back to back (fsattn._ext.time_bla_step)
  C, spaced    the same, each call timed alone with a busy wait after it as long as the
               Python wrapper's own work (the library's worker threads may idle between calls)
  binding      fsattn._ext.bla_step called from Python with precomputed pointers (pybind11)
  python       fsattn.bla_step (argument checks, output allocation, the binding)
  wrapper only fsattn.bla_step with the library call replaced by a no-op: the Python work alone
               (the minimum over the repeats)
The overhead of the package is `python - C`; `wrapper only` is its part spent in Python.
Run it on an otherwise idle machine: the numbers are a few microseconds.
"""

import argparse
import statistics
import time

import torch

import fsattn
from fsattn import _bla, _ext


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()

    B, H, D, S = 1, 4, 64, 64
    M, W = (S - 1) // 2, 256.0
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, 1, H, D, generator=g) for _ in range(3))
    lg = torch.full((H,), -0.01)
    sk, sv = torch.zeros(B, H, S, D), torch.zeros(B, H, S, D)
    o = torch.empty(B, 1, H, D)
    ptrs = (lg.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), sk.data_ptr(), sv.data_ptr(), o.data_ptr())
    st = (sk, sv)

    def c_loop(n, gap=0.0):
        return _ext.time_bla_step(n, gap, B, H, D, D, M, W, S, 0.0, 0, *ptrs)

    def binding_loop(n):
        f = _ext.bla_step
        t0 = time.perf_counter()
        for i in range(n):
            f(0, 0, None, B, H, D, D, M, W, S, 0.0, i, *ptrs)
        return (time.perf_counter() - t0) / n

    def python_loop(n):
        f = fsattn.bla_step
        t0 = time.perf_counter()
        for i in range(n):
            f(q, k, v, lg, st, pos=i, modes=M, period=W)
        return (time.perf_counter() - t0) / n

    class NoLibrary:
        def bla_step(self, *a):
            pass

    def wrapper_only(n):
        real = _bla._ext
        _bla._ext = NoLibrary()
        try:
            return python_loop(n)
        finally:
            _bla._ext = real

    wrapper = min(wrapper_only(args.iters) for _ in range(args.repeats))  # deterministic work: the minimum
    for fn in (c_loop, binding_loop, python_loop):  # warm up
        fn(500)
    res = {"C": [], "C, spaced": [], "binding": [], "python": []}
    for _ in range(args.repeats):
        res["C"].append(c_loop(args.iters))
        res["C, spaced"].append(c_loop(args.iters, wrapper))
        res["binding"].append(binding_loop(args.iters))
        res["python"].append(python_loop(args.iters))
    res["wrapper only"] = [wrapper]
    med = {name: statistics.median(x) * 1e6 for name, x in res.items()}
    print(f"torch {torch.__version__}, libfsattn {fsattn.library_version()}, custom ops: {fsattn.USES_CUSTOM_OPS}")
    print(f"bla_step B={B} H={H} Dk=Dv={D} S={S} M={M} W={W}: median of {args.repeats} x {args.iters} calls")
    for name, x in res.items():
        print(f"  {name:12s} {med[name]:8.2f} us/call   (min {min(x) * 1e6:.2f})")
    print(f"  overhead per call: fsattn.bla_step - C = {med['python'] - med['C']:.2f} us "
          f"(- C spaced: {med['python'] - med['C, spaced']:.2f} us); binding - C = {med['binding'] - med['C']:.2f} us; "
          f"Python work alone {med['wrapper only']:.2f} us")


if __name__ == "__main__":
    main()
