#!/usr/bin/env python3
"""Turns fsattn-tune files into runtime/tuning/builtin.json: each entry's variant is chosen
again among the variants of the default build (those in generators/kernel_table.inc of a
build without FSATTN_SWEEP), from the times the file holds; entries of ops with one such
variant are dropped (there is nothing to choose).

  python3 bench/builtin_tuning.py build-default/generators/kernel_table.inc tuning.json... > builtin.json
"""

import json
import re
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    variants = {}
    with open(sys.argv[1]) as f:
        for op, device, variant, schedule in re.findall(r"FSATTN_KERNEL\((\w+), (\w+), (\w+), (\w+),", f.read()):
            if schedule == "hand":
                variants.setdefault((op, device), []).append(variant)
    out, entries = None, []
    for path in sys.argv[2:]:
        with open(path) as f:
            data = json.load(f)
        if out is None:
            out = {k: v for k, v in data.items() if k != "entries"}
        for e in data["entries"]:
            allowed = variants.get((e["op"], e["device"]), [])
            times = {v: ms for v, ms in e["ms"].items() if v in allowed}
            if len(allowed) < 2 or not times:
                continue
            e = dict(e, variant=min(times, key=times.get), ms=times)
            entries.append(e)
    out["entries"] = entries
    lines = json.dumps(out, indent=2).splitlines()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
