import json,glob,statistics as st,collections,sys
pat = sys.argv[1] if len(sys.argv)>1 else '/tmp/ab1/shm%s-*.json'
for tag in sys.argv[2:] or ['1','0']:
    per=collections.defaultdict(list)
    for f in sorted(glob.glob(pat%tag)):
        d=json.load(open(f))
        for s in [x for x in d['series'] if x['seconds']]:
            per[(s['workload'],s['bytes'],s['impl'])].append(st.median(s['seconds']))
    print('==', tag)
    for k,v in sorted(per.items()):
        print('%-14s %10d %-11s job medians(us): %s  median %.1f'%(k[0],k[1],k[2],' '.join('%.0f'%(x*1e6) for x in v), 1e6*st.median(v)))
