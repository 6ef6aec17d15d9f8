import json,glob,statistics,collections,sys
d=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/*.json'):
    v,sz,p=f.split('/')[-1][:-5].split('-')
    j=json.load(open(f))
    for s in j['series']:
        d[(int(sz),v,s['impl'])]+=s['seconds']
for sz in sorted({k[0] for k in d}):
    row=[]
    for v in ['before','after']:
        for impl in ['troupe-mpi','raw-mpi']:
            x=d.get((sz,v,impl))
            if x: row.append('%s %s %.3f ms (n=%d)'%(v,impl,statistics.median(x)*1e3,len(x)))
    print(sz, ' | '.join(row))
