#!/usr/bin/env python3
"""Markdown table of the CUDA rows of an fsattn-bench JSON file (--benchmark_out), and of a
bench/peer_gpu.py JSON file beside them when given.

  python3 bench/gpu_table.py bench.json [peers.json]

Each row: benchmark, median ms (the iteration time fsattn-bench reports is the median of its
timed calls), GB/s, GFLOP/s and the fraction of the H200's fp32 ceiling (60 TFLOP/s).
"""

import json
import sys


def fsattn_rows(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        name = b["name"].replace("/iterations:1/manual_time", "")
        if "/cuda" not in name:
            continue
        if "error_occurred" in b and b["error_occurred"]:
            rows.append(f"| {name} | error: {b.get('error_message', '')} | | | |")
            continue
        ms = b["real_time"] if b["time_unit"] == "ms" else b["real_time"] / 1000.0
        gflops = b.get("GFLOP/s", 0.0)
        rows.append(f"| {name} | {ms:.3f} | {b.get('GB/s', 0.0):.0f} | {gflops:.0f} | {gflops / 60e3:.1%} |")
    return rows


def peer_rows(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for r in data.get("results", data if isinstance(data, list) else []):
        if not isinstance(r, dict):
            continue
        name = r.get("method", r.get("name", "?"))
        shape = f"B={r.get('B')} T={r.get('T')}"
        fwd, fb = r.get("fwd_ms"), r.get("fwd_bwd_ms")
        fmt = lambda x: f"{x:.3f}" if isinstance(x, (int, float)) else str(x)
        rows.append(f"| {name} {shape} | fwd {fmt(fwd)} | fwd+bwd {fmt(fb)} | | |")
    return rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| benchmark | ms | GB/s | GFLOP/s | of fp32 peak |")
    print("|---|---|---|---|---|")
    for row in fsattn_rows(sys.argv[1]):
        print(row)
    if len(sys.argv) > 2:
        for row in peer_rows(sys.argv[2]):
            print(row)


if __name__ == "__main__":
    main()
