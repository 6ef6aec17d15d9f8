import json,statistics,glob,sys
def med(f, impl):
    d=json.load(open(f))
    for s in d['series']:
        if s['impl']==impl: return statistics.median(s['seconds'])
for pat,label in [('p_auto_allreduce-4_*','auto (runtime pinned), 4 B'),('loop-unbound-p_cpu_allreduce-4_*','cpu + Gloo loop unbound, 4 B'),
                  ('p_auto_allreduce-1048576_*','auto, 1 MiB'),('loop-unbound-p_cpu_allreduce-1048576_*','cpu + Gloo loop unbound, 1 MiB'),
                  ('q_allreduce-4_*','runtime + thread-affinity, 4 B'),('q_allreduce-1048576_*','runtime + thread-affinity, 1 MiB')]:
    fs=sorted(glob.glob(sys.argv[1]+'/'+pat))
    print(label, ' / '.join('%.1f vs %.1f' % (med(f,'troupe-gloo-noshm')*1e6, med(f,'raw-gloo')*1e6) for f in fs))
