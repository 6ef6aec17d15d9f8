"""CPU time and scheduling slices per step, by thread, of a 2-rank
allreduce_bench job (troupe-only), from /proc/<pid>/task/<tid>/schedstat.

    /usr/bin/python3 thread_cpu.py MODE ITERATIONS [troupe-run flags...]

MODE is mpi or gloo. WL picks the workload (default small_tensors, e.g.
allreduce:4). BATCH=caf,troupe sets SCHED_BATCH on the threads whose names
start with those prefixes (the CAF scheduler's and Troupe's own) 7 s into
the job, before the 3 s window is measured. The job must outlast the
window (7 + 3 s). Steps in the window = 3 s / the median of the job's last
third of steps. Run from the repository root, with the build in build/.
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import time

mode, iterations = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
build = os.path.abspath(os.environ.get('TROUPE_BUILD_DIR', 'build'))
out = '/tmp/thread-cpu-%s.json' % mode
with open('/tmp/thread-cpu-%s.log' % mode, 'w') as log:
    job = subprocess.Popen(
        ['flock', '/tmp/troupe-build.lock', build + '/bin/troupe-run', '--' + mode, '-np', '2'] +
        extra + [build + '/bin/allreduce_bench', '--only', os.environ.get('WL', 'small_tensors'),
                 '--troupe-only', '--iterations', iterations, '--rounds', '1',
                 '--idle-seconds', '1', '--json', out], stdout=log, stderr=log)
    time.sleep(7)


def ranks():
    found = []
    for d in glob.glob('/proc/[0-9]*'):
        try:
            if open(d + '/comm').read().strip() == 'allreduce_bench':
                found.append(d)
        except OSError:
            pass
    return found


def snapshot(proc):
    threads = {}
    for t in glob.glob(proc + '/task/*'):
        try:
            name = open(t + '/comm').read().strip()
            stat = open(t + '/schedstat').read().split()
            cpus = [l.split()[1] for l in open(t + '/status') if l.startswith('Cpus_allowed_list')]
            threads[t] = (name, int(stat[0]), int(stat[2]), cpus[0])
        except OSError:
            pass
    return threads


procs = ranks()
if os.environ.get('BATCH'):
    prefixes = os.environ['BATCH'].split(',')
    for proc in procs:
        for t in glob.glob(proc + '/task/*'):
            if any(open(t + '/comm').read().startswith(p) for p in prefixes):
                subprocess.call(['chrt', '-b', '-p', '0', os.path.basename(t)])
    time.sleep(0.5)
before = {p: snapshot(p) for p in procs}
time.sleep(3)
after = {p: snapshot(p) for p in procs}
job.wait()
seconds = json.load(open(out))['series'][0]['seconds']
median = statistics.median(seconds[-len(seconds) // 3:])
steps = 3 / median
print('median %.1f us' % (median * 1e6))
for proc in procs:
    print(proc)
    for t, (name, cpu, slices, cpus) in before[proc].items():
        if t in after[proc]:
            used = (after[proc][t][1] - cpu) / 1e3 / steps
            ran = (after[proc][t][2] - slices) / steps
            if used > 0.5:
                print('  %-16s cpus %-4s %6.1f us/step %5.1f slices/step' % (name, cpus, used, ran))
