#!/usr/bin/python3
# Summarises autotune_bench passes (run in the directory of their passN.txt):
#   summarize.py WORKLOAD PASS...
# the tuner's setting against the best hand-picked one, against raw MPI,
# and against the sweep's settings of fusion >= 1 MiB and no cycle time
# (for 200 x 4 KiB they all fuse the whole 800 KiB step into one list).
import re, statistics, sys
workload = sys.argv[1]
for p in sys.argv[2:]:
    rows, froze = {}, None
    for line in open(f'pass{p}.txt'):
        line = line.replace('[1,0]<stdout>:', '')  # mpirun's tag, also inside long lines
        m = re.search(r'autotune_bench: ' + workload + r' \| (.*?) \| ([0-9.]+) ms \| rounds (.*)', line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), [float(x) for x in m.group(3).split()])
        m = re.search(r'tuner froze (.*) after (\d+) steps', line)
        if m:
            froze = (m.group(1), m.group(2))
    tuner = [k for k in rows if k.startswith("tuner's")][0]
    own = rows['autotuned (own init)'][0]
    sweep = {k: v for k, v in rows.items() if k.startswith('fusion')}
    best = min(sweep, key=lambda k: sweep[k][0])
    one_list = [sweep[k][0] for k in sweep
                if 'cycle 0.000000' in k and int(re.search(r'fusion (\d+)', k).group(1)) >= 1 << 20]
    t = rows[tuner][0]
    print(f"pass {p}: {len(rows[tuner][1])} rounds; froze {froze[0]} after {froze[1]} steps")
    print(f"  tuner's setting {t:.3f} ms, own init {own:.3f} ms, best hand-picked {sweep[best][0]:.3f} ms ({best})")
    print(f"  tuner/best {t / sweep[best][0]:.3f}, own init/best {own / sweep[best][0]:.3f}")
    print(f"  one-list settings {' '.join('%.3f' % x for x in one_list)} ms: max/min {max(one_list) / min(one_list):.3f}, "
          f"tuner/their median {t / statistics.median(one_list):.3f}")
    raw = rows['raw MPI one by one'][0]
    raw_own = rows["raw MPI one by one (autotuned's init)"][0]
    print(f"  raw MPI one by one {raw:.3f} ms: tuner/raw {t / raw:.3f}; own init {own:.3f} ms against "
          f"raw {raw_own:.3f} ms in its init")
