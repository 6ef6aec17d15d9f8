"""Medians of job medians, per mode and workload, of one folder's jobs
<mode>-<off|on>-<pair>.json (off: as committed; on: the probe build with
TROUPE_PROBE_BATCH=1, see README.md), and the median of the pairs' on/off
ratios.

    /usr/bin/python3 ab_summary.py ab-all-batch|ab-scheduler-batch
"""
import glob, json, os, re, statistics, sys
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), sys.argv[1])
jobs = {}
for path in sorted(glob.glob(os.path.join(here, '*.json'))):
    mode, variant, pair = re.match(r'(\w+)-(off|on)-(\d+)\.json', os.path.basename(path)).groups()
    for s in json.load(open(path))['series']:
        key = (mode, '%s %d' % (s['workload'], s['bytes']))
        jobs.setdefault(key, {}).setdefault(variant, {})[pair] = statistics.median(s['seconds']) * 1e6
print('| mode | workload | off (job medians, us) | on | off median | on median | on/off, median of pairs |')
print('|---|---|---|---|---|---|---|')
for (mode, w), v in sorted(jobs.items()):
    pairs = sorted(set(v.get('off', {})) & set(v.get('on', {})))
    ratio = statistics.median(v['on'][p] / v['off'][p] for p in pairs)
    fmt = lambda d: ', '.join('%.1f' % d[p] for p in pairs)
    print('| %s | %s | %s | %s | %.1f | %.1f | %.2f |' % (mode, w, fmt(v['off']), fmt(v['on']),
          statistics.median(v['off'].values()), statistics.median(v['on'].values()), ratio))
