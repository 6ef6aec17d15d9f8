#!/usr/bin/env python3
"""Job medians of the direct-allreduce A/B (README.md here): A ring (Gloo's
allreduce), B one exchange of whole buffers; raw Gloo ran in the same jobs."""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
for size in ("4", "1024", "65536"):
    for variant in ("A", "B"):
        rows = {}
        for path in sorted(glob.glob(os.path.join(here, f"{variant}.allreduce:{size}.*.json"))):
            for s in json.load(open(path))["series"]:
                rows.setdefault(s["impl"], []).append(statistics.median(s["seconds"]) * 1e6)
        print(f"{size:>6} B {variant}: " + ", ".join(
            f"{impl} {' / '.join('%.1f' % v for v in vals)} us" for impl, vals in sorted(rows.items())))
for variant in ("A", "B"):
    vals = [statistics.median(json.load(open(p))["series"][0]["seconds"]) * 1e6
            for p in sorted(glob.glob(os.path.join(here, "whole-1mib", f"{variant}.allreduce:1048576.*.json")))]
    print(f"1 MiB {variant} ({'ring' if variant == 'A' else 'whole buffers'}): "
          + " / ".join("%.1f" % v for v in vals) + " us")
