#!/usr/bin/env python3
"""PNG plots from fsattn-bench JSON (--benchmark_out) and bench/peer_gpu.py JSON.

  python3 bench/plot.py [--bench bench.json...] [--peers seqlen.json] [--tuning tuning.json]
                        [--out docs/plots]

Writes, for what the files hold:
  schedules_cuda.png  time per schedule, per op and tuned shape, on the GPU (fsattn-tune file)
  schedules_cpu.png   the same on the CPU
  schedules_baselines.png  hand schedules and autoscheduled builds at B=2 T=2048 H=4 (bench JSON)
  seqlen_cuda.png     time against sequence length (1K-64K, B = max(1, 32768 / T)) of the
                      fsattn forwards and forward+backwards next to SDPA flash attention
  steps.png           decode-step latency and state bandwidth against batch size, CPU and GPU
Needs matplotlib.
"""

import argparse
import collections
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def ms_of(b):
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale


def load_bench(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        if b.get("error_occurred") or b.get("run_type") == "aggregate":
            continue
        name = re.sub(r"/(iterations:\d+|manual_time|real_time|min_time:[\d.]+)", "", b["name"])
        b = dict(b, cpus=data.get("context", {}).get("num_cpus"))
        rows.append((name, ms_of(b), b))
    return rows, data.get("context", {})


def schedules(entries, device, machine, out):
    """From fsattn-tune files: one panel per op, bars of ms per variant at each tuned shape."""
    ops = collections.defaultdict(list)
    for e in entries:
        if e["device"] == device and "step" not in e["op"]:
            ops[e["op"]].append(e)
    if not ops:
        return None
    fig, axes = plt.subplots(len(ops), 1, figsize=(11, 3.3 * len(ops)), squeeze=False)
    for ax, (op, rows) in zip(axes[:, 0], ops.items()):
        variants = sorted({v for e in rows for v in e["ms"]})
        width = 0.8 / len(variants)
        for i, v in enumerate(variants):
            xs = [j + i * width for j, e in enumerate(rows) if v in e["ms"]]
            ms = [e["ms"][v] for e in rows if v in e["ms"]]
            bars = ax.bar(xs, ms, width, label=v)
            ax.bar_label(bars, labels=[f"{m:.3g}" for m in ms], fontsize=6, rotation=90, padding=2)
        s = [e["shape"] for e in rows]
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))],
                      [f"B={x['batch']} T={x['seqlen']} H={x['heads']}" for x in s], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title(f"{op} on {machine}: every hand-scheduled variant (D=64, 64 modes/slots, fp32)", fontsize=9)
        ax.legend(fontsize=7, ncol=4)
    fig.tight_layout()
    path = os.path.join(out, f"schedules_{device}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def baselines(rows, out):
    """From fsattn-bench JSON: ms per variant per op at the baselines' shape (B=2, T=2048, H=4),
    hand schedules next to the autoscheduled builds, one panel per device."""
    panels = collections.defaultdict(lambda: collections.defaultdict(dict))
    for name, ms, b in rows:
        parts = name.split("/")
        if len(parts) >= 3 and parts[1] == "cuda" and name.endswith("/B=2,T=2048,H=4"):
            panels["GPU"][parts[0]][parts[2]] = ms
        elif len(parts) == 3 and parts[1] == "cpu" and not parts[2].startswith("B="):
            panels[f"{b['cpus']}-core CPU"][parts[0]][parts[2]] = ms
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.6 * len(panels)), squeeze=False)
    for ax, (device, ops) in zip(axes[:, 0], sorted(panels.items())):
        x, ticks, labels = 0, [], []
        for op, variants in ops.items():
            for v, ms in variants.items():
                auto = re.search("adams|mullapudi|li2018|anderson2021", v) is not None
                bar = ax.bar(x, ms, color="tab:orange" if auto else "tab:blue")
                ax.bar_label(bar, labels=[f"{ms:.3g}"], fontsize=7, padding=2)
                ticks.append(x)
                labels.append(f"{op}\n{v}")
                x += 1
            x += 1
        ax.set_xticks(ticks, labels, rotation=70, ha="right", fontsize=6)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title(f"{device}, B=2 T=2048 H=4 D=64, 64 modes/slots, fp32 (blue: hand, orange: autoscheduled)",
                     fontsize=9)
    fig.tight_layout()
    path = os.path.join(out, "schedules_baselines.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def seqlen(rows, peers, out):
    series = collections.defaultdict(dict)
    for name, ms, _ in rows:
        m = re.match(r"(\w+_forward(\+backward)?)/cuda/seqlen/T=(\d+)$", name)
        if m:
            series[("fsattn " + m.group(1).split("_")[0].upper(), bool(m.group(2)))][int(m.group(3))] = ms
    for r in peers:
        for key, both in (("fwd_ms", False), ("fwdbwd_ms", True)):
            if r.get(key) is not None:
                series[(r["method"] + (" (bf16)" if "sdpa" in r["method"] else ""), both)][r["T"]] = r[key]
    if not series:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, both in zip(axes, (False, True)):
        for (label, b), pts in sorted(series.items()):
            if b != both or not pts:
                continue
            T = sorted(pts)
            ax.plot(T, [pts[t] for t in T], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (batch = max(1, 32768 / T), H=16, D=64)")
        ax.set_ylabel("ms (log)")
        ax.set_title("forward + backward" if both else "forward", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "seqlen_cuda.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def steps(rows, out):
    series = collections.defaultdict(dict)
    for name, ms, b in rows:
        m = re.match(r"(ida|bla)_step/(cpu|cuda\w*)/B=(\d+)$", name)
        if m:
            device = f"{b['cpus']}-core CPU" if m.group(2) == "cpu" else f"GPU {m.group(2)}"
            series[(m.group(1).upper(), device)][int(m.group(3))] = (ms, b.get("GB/s", b.get("state GB/s", 0.0)))
    if not series:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for (op, device), pts in sorted(series.items()):
        B = sorted(pts)
        style = "-" if device.startswith("GPU") else "--"
        axes[0].plot(B, [pts[b][0] * 1e3 for b in B], style, marker="o", label=f"{op} step, {device}")
        axes[1].plot(B, [pts[b][1] for b in B], style, marker="o", label=f"{op} step, {device}")
    # 70% of the H200's 4.27 TB/s copy bandwidth at B=64: 90 µs for IDA's 256 MiB of state
    # and 45 µs for BLA's 128 MiB.
    axes[0].plot([64, 64], [45, 90], ls="none", marker="_", ms=14, color="gray")
    axes[0].text(70, 60, "70% of copy bandwidth at B=64:\nIDA 90 µs, BLA 45 µs", fontsize=7, color="gray")
    axes[1].axhline(0.7 * 4270, color="gray", lw=0.8, ls=":")
    axes[1].text(1, 0.7 * 4270 * 0.95, "70% of the H200's copy bandwidth", fontsize=7, color="gray")
    axes[0].set_ylabel("µs per step (log)")
    axes[1].set_ylabel("state GB/s (read + write)")
    # (Legends where the curves are not: upper left for time, centre left for bandwidth, below
    # the aim's line.)
    for ax, where in zip(axes, ["upper left", "center left"]):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch (sequences), H=32, D=64, M=S=64")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc=where)
    axes[0].set_yscale("log")
    fig.tight_layout()
    path = os.path.join(out, "steps.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="+", default=[], help="fsattn-bench JSON files")
    ap.add_argument("--tuning", help="an fsattn-tune file")
    ap.add_argument("--peers", help="bench/peer_gpu.py --seqlens JSON")
    ap.add_argument("--out", default="docs/plots")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for path in args.bench:
        rows += load_bench(path)[0]
    peers = []
    if args.peers:
        with open(args.peers) as f:
            peers = json.load(f)["results"]
    plots = [seqlen(rows, peers, args.out), steps(rows, args.out), baselines(rows, args.out)]
    if args.tuning:
        with open(args.tuning) as f:
            tuning = json.load(f)
        for device, key in (("cuda", "gpu"), ("cpu", "cpu")):
            plots.append(schedules(tuning["entries"], device, tuning.get(key, device), args.out))
    for path in plots:
        if path:
            print("wrote", path)


if __name__ == "__main__":
    main()
