import re,sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    cfg=l.split(':')[0]
    m=re.findall(r'(\S+) (\S+?):\d+ ([\d.]+)us',l)
    v={k:float(x) for k,_,x in m}
    if 'troupe-mpi' in v and 'raw-mpi' in v: d[cfg].append((v['troupe-mpi']/1000, v['troupe-mpi']/v['raw-mpi']))
    elif "troupe-gloo" in v: d[cfg].append((v["troupe-gloo"]/1000, v["troupe-gloo"]/v.get("raw-gloo",v["troupe-gloo"])))
for k,v in d.items():
    import statistics
    print(f"{k:22s} ms {' '.join('%.2f'%a for a,_ in v)} | ratio {' '.join('%.3f'%b for _,b in v)} | median ratio {statistics.median(b for _,b in v):.3f}")
