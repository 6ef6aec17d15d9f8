import json,sys,statistics,glob,collections
d=sys.argv[1]
rows=collections.defaultdict(list)
for f in sorted(glob.glob(d+"/*.json")):
    name=f.split("/")[-1][:-5]; w,y,p=name.rsplit("-",2)
    j=json.load(open(f))
    s={x["impl"]:statistics.median(x["seconds"]) for x in j["series"]}
    t=[v for k,v in s.items() if k.startswith("troupe")][0]
    rows[(w,y)].append((t, s.get("raw-mpi")))
for (w,y),v in sorted(rows.items()):
    print(w,y," ".join("%.1f/%.1f=%.2f"%(a*1e6,b*1e6,a/b) for a,b in v), " median ratio %.2f"%statistics.median([a/b for a,b in v]), "median troupe %.1f"%(statistics.median([a for a,b in v])*1e6))
