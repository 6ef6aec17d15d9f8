import json,sys,statistics
for f in sys.argv[1:]:
    d=json.load(open(f))
    out=[]
    for s in d['series']:
        v=s.get('seconds') or s.get('samples') or []
        out.append(f"{s.get('impl')} {s.get('workload')}:{s.get('bytes')} {statistics.median(v)*1e6:.1f}us n={len(v)}")
    print(f, '; '.join(out))
