import json,glob,sys,collections,statistics as st
for pat in sys.argv[1:]:
    per=collections.defaultdict(list)
    for f in glob.glob(pat):
        for s in json.load(open(f))['series']:
            if s['impl'].startswith('troupe'): per[(s['workload'],s['bytes'])]+=s['seconds']
    print('==',pat, '  '.join('%s:%d mean %.0f'%(k[0][:6],k[1],1e6*st.mean(v)) for k,v in sorted(per.items()) if k[1] in (4,65536,1048576,819200) or k[0]=='resnet50'))
