import json,sys,statistics,collections,glob
rows=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    cfg=f.split('__')[1].replace('.json','')
    d=json.load(open(f))
    for s in d['series']:
        rows[(s['impl'],s['workload'],s['bytes'])][cfg].append(s['seconds'])
def st(v):
    sv=sorted(v); return '%.0f/%.0f/%.0f'%(sv[len(v)//2]*1e6, statistics.mean(v)*1e6, sv[int(0.99*(len(v)-1))]*1e6)
for k in sorted(rows, key=lambda k:(k[0],k[2])):
    print(k[0], k[1], k[2])
    for cfg in sorted(rows[k]):
        jobs=rows[k][cfg]
        print('   ', cfg, 'per job med/mean/p99:', '  '.join(st(v) for v in jobs), '| pooled', st([x for v in jobs for x in v]))
