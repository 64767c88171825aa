#!/usr/bin/env python3
"""Turns fsattn-tune files into runtime/tuning/builtin.json: each entry's variant is chosen
again among the variants of the full build (those in generators/kernel_table.inc of a build
with FSATTN_VARIANTS=all and without FSATTN_SWEEP), from the times the file holds. A variant
other than the op's default (its first in the table) is picked only where it is faster than
the default by at least --margin (default 10%): the default build compiles the variants the
table picks, and one that gains less is not worth its compile time. Entries of ops with one
such variant are dropped (there is nothing to choose).

  python3 bench/builtin_tuning.py build-all/generators/kernel_table.inc tuning.json... > builtin.json
"""

import argparse
import json
import re


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel_table")
    ap.add_argument("tuning_files", nargs="+")
    ap.add_argument("--margin", type=float, default=0.10,
                    help="how much faster than the default a variant must be to be picked")
    args = ap.parse_args()
    variants = {}
    with open(args.kernel_table) as f:
        for op, device, variant, schedule in re.findall(r"FSATTN_KERNEL\((\w+), (\w+), (\w+), (\w+),", f.read()):
            if schedule == "hand":
                variants.setdefault((op, device), []).append(variant)
    out, entries = None, []
    for path in args.tuning_files:
        with open(path) as f:
            data = json.load(f)
        if out is None:
            out = {k: v for k, v in data.items() if k != "entries"}
        for e in data["entries"]:
            allowed = variants.get((e["op"], e["device"]), [])
            times = {v: ms for v, ms in e["ms"].items() if v in allowed}
            if len(allowed) < 2 or not times:
                continue
            best = min(times, key=times.get)
            default = allowed[0]
            if default in times and times[best] > (1 - args.margin) * times[default]:
                best = default
            entries.append(dict(e, variant=best, ms=times))
    out["entries"] = entries
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
