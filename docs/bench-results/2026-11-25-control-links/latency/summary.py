#!/usr/bin/python3
"""Medians of Troupe's rows in latency.sh's JSON, pooled over the passes."""
import glob, json, os, statistics
here = os.path.dirname(os.path.abspath(__file__))
rows = {}
for path in glob.glob(os.path.join(here, '*.json')):
    be, np, workload, tree, _ = os.path.basename(path)[:-5].split('-')
    for series in json.load(open(path))['series']:
        if series['impl'].startswith('troupe'):
            rows.setdefault((be, np, workload), {}).setdefault(tree, []).extend(series['seconds'])
print('| backend | ranks | row | before (d0eb180) | after | after/before | samples |')
print('|---|---|---|---|---|---|---|')
for (be, np, workload), by in sorted(rows.items()):
    scale, unit = (1e6, 'µs') if workload == 'allreduce' else (1e3, 'ms')
    b, a = statistics.median(by['before']) * scale, statistics.median(by['after']) * scale
    name = '4 B allreduce' if workload == 'allreduce' else '200 × 4 KiB step'
    print(f"| {be} | {np[2:]} | {name} | {b:.1f} {unit} | {a:.1f} {unit} | {a / b:.2f} "
          f"| {len(by['before'])} / {len(by['after'])} |")
