"""The cost of reading q, k and v through their strides against copying them first, CPU.

    python bench/strided_inputs.py [--repeats R]

BLA and IDA forward and forward+backward at B=2, T=2048, H=4, D=64 (BLA S=64, M=31, W=256;
IDA M=64), fp32, q, k, v the slices of one fused [B, T, 3, H, D] projection. Per op, the
median over R runs of:
  strided     the slices passed as they are (read through dims->layout, no copy)
  copied      .contiguous() copies made first, their time included
  contiguous  tensors that are contiguous to begin with (the kernels alone)
"""

import argparse
import statistics
import time

import torch

import fsattn
import fsattn.nn


def median_ms(fn, repeats):
    fn()  # warm-up: workspace, first touch
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    B, T, H, D = 2, 2048, 4, 64
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, T, 3, H, D, generator=g)
    lg = torch.full((H,), -0.01)
    params = fsattn.nn.ida_reference_init(H, D, 64, g)
    ops = {
        "bla": lambda q, k, v: fsattn.bla(q, k, v, lg, modes=31, period=256.0, slots=64)[0],
        "ida": lambda q, k, v: fsattn.ida(q, k, v, params)[0],
    }
    print(f"B={B} T={T} H={H} D={D} fp32, {torch.get_num_threads()} threads; ms, median of {args.repeats}")
    print(f"{'op':<22}{'strided':>10}{'copied':>10}{'contiguous':>12}")
    for name, op in ops.items():
        for backward in (False, True):
            def run(make):
                def call():
                    leaf = x.detach().clone().requires_grad_(backward) if backward else x
                    q, k, v = make(leaf)
                    o = op(q, k, v)
                    if backward:
                        o.sum().backward()
                return call

            views = lambda t: t.unbind(2)
            copies = lambda t: [s.contiguous() for s in t.unbind(2)]
            dense = [s.contiguous() for s in x.unbind(2)]
            row = [median_ms(run(views), args.repeats), median_ms(run(copies), args.repeats)]
            if backward:
                leaves = [t.detach().clone().requires_grad_() for t in dense]
                row.append(median_ms(lambda: op(*leaves).sum().backward(), args.repeats))
            else:
                row.append(median_ms(lambda: op(*dense), args.repeats))
            label = f"{name} {'forward+backward' if backward else 'forward'}"
            print(f"{label:<22}{row[0]:>10.2f}{row[1]:>10.2f}{row[2]:>12.2f}")


if __name__ == "__main__":
    main()
