# summary.py: job medians of each row, per binding (gloo-<binding>-<job>.json).
import collections, glob, json, statistics, sys
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob('gloo-*.json')):
    binding = f.split('-')[1]
    d = json.load(open(f))
    for se in d['series']:
        s = sorted(se['seconds'])
        rows[(se['workload'], se['bytes'], se['impl'])][binding].append(s[len(s) // 2] * 1e6)
    idle = d.get('idle', {})
    if idle:
        rows[('idle cpu %', 0, idle['impl'])][binding].append(100 * max(idle['cpu_share_per_rank']))
print('| row | impl | none (jobs) | runtime (auto) (jobs) | auto / none |')
print('|---|---|---|---|---|')
for (w, b, impl), by in sorted(rows.items()):
    n, a = by.get('none', []), by.get('auto', [])
    if not n or not a:
        continue
    r = statistics.median(a) / statistics.median(n)
    fmt = lambda v: ', '.join(f'{x:.1f}' for x in v)
    print(f'| {w} {b} | {impl} | {fmt(n)} | {fmt(a)} | {r:.2f} |')
