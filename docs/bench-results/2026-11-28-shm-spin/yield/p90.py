import json,glob,sys,collections
def pct(v,q): v=sorted(v); return v[min(len(v)-1,int(q*len(v)))]
for pat in sys.argv[1:]:
    per=collections.defaultdict(list)
    for f in glob.glob(pat):
        for s in json.load(open(f))['series']:
            if s['impl'].startswith('troupe'): per[(s['workload'],s['bytes'])]+=s['seconds']
    print('==',pat)
    for k,v in sorted(per.items()):
        if k[1] in (4,65536,1048576,819200): print('  %-14s %9d  p50 %7.0f p90 %7.0f p99 %7.0f us'%(k[0],k[1],1e6*pct(v,.5),1e6*pct(v,.9),1e6*pct(v,.99)))
