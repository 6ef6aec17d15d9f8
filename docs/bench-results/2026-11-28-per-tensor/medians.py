import json,glob,statistics,sys,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    j=json.load(open(f)); name=f.split('/')[-1].rsplit('-',1)[0]
    for s in j['series']:
        d[name].append(statistics.median(s['seconds'])*1e6)
for k,v in sorted(d.items()):
    print(f"{k:40s} n={len(v)} median of job medians {statistics.median(v):8.1f} us  jobs: {' '.join(f'{x:.0f}' for x in v)}")
