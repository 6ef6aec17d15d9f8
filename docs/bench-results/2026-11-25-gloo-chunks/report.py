import json,glob,statistics,collections,sys
d=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/*.json'):
    v,w,p=f.split('/')[-1][:-5].split('-')
    for s in json.load(open(f))['series']:
        d[(w,s['impl'],v)]+=s['seconds']; d[(w,s['impl'],v,'passes')].append(round(statistics.median(s['seconds'])*1e3,2))
for k in sorted(d):
    if len(k)==3: print(k, '%.3f ms'%(statistics.median(d[k])*1e3), 'n=%d'%len(d[k]), 'per pass', d[k+('passes',)])
