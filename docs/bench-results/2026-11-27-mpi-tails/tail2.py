import json,sys,statistics,collections
rows=collections.defaultdict(list)
for f in sys.argv[1:]:
    cfg=f.split('__')[1].replace('.json','')
    d=json.load(open(f))
    for s in d['series']:
        v=s['seconds']; sv=sorted(v)
        rows[(s['impl'],s['workload'],s['bytes'])].append((cfg, sv[len(v)//2]*1e6, statistics.mean(v)*1e6, sv[int(0.99*(len(v)-1))]*1e6))
for k in sorted(rows):
    print(k[0], k[1], k[2], ' | '.join('%s med %.0f mean %.0f p99 %.0f' % x for x in sorted(rows[k])))
