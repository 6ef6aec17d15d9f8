import glob,subprocess,time,sys
mode=sys.argv[1]; extra=sys.argv[2:]
job=subprocess.Popen(['build/bin/troupe-run','--'+mode,'-np','2']+extra+['build/bin/allreduce_bench','--only','allreduce:4','--troupe-only','--rounds','1','--iterations','100','--idle-seconds','10','--json','/tmp/idle.json'],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
def snap():
    r={}
    for d in glob.glob('/proc/[0-9]*'):
        try:
            if open(d+'/comm').read().strip()!='allreduce_bench': continue
        except OSError: continue
        for t in glob.glob(d+'/task/*'):
            try:
                n=open(t+'/comm').read().strip(); s=open(t+'/schedstat').read().split()
                r[t]=(n,int(s[0]),int(s[2]))
            except OSError: pass
    return r
time.sleep(6); a=snap(); time.sleep(4); b=snap()
tot={}
for t in sorted(b):
    if t in a:
        pid=t.split('/')[2]; cpu=(b[t][1]-a[t][1])/4e9*100; sl=(b[t][2]-a[t][2])/4
        tot[pid]=tot.get(pid,0)+cpu
        if cpu>0.02: print(pid, b[t][0], '%.2f%%'%cpu, '%.0f wakes/s'%sl)
print(tot)
job.wait()
import json; print(json.load(open('/tmp/idle.json'))['idle'])
