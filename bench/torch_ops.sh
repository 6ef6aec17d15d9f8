#!/usr/bin/env bash
# Broadcast, allgather, allreduce (sum, average), reduce-scatter and alltoall from Python, troupe.torch against
# torch.distributed (gloo), 2 ranks on this host, jobs alternating:
#   flock /tmp/troupe-build.lock bash bench/torch_ops.sh [--passes N] [--out DIR]
# Prints a markdown table (median of the passes' medians, in µs, and
# Troupe ÷ torch) and writes DIR/torch_ops.json. Build first (troupe-run and
# the Python module: cmake --build build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${TROUPE_BUILD_DIR:-$here/../build}" && pwd)
python=${PYTHON:-/usr/bin/python3}
passes=3
out=$build/bench-results
while [ $# -gt 0 ]; do
  case $1 in
    --passes) passes=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "usage: $0 [--passes N] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
rm -f "$out"/ops-*.json
free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# torch.distributed runs unbound, as torchrun runs it; Troupe as
# troupe-run places it by default.
for pass in $(seq 1 "$passes"); do
  for impl in troupe torch; do
    echo "bench/torch_ops.sh: pass $pass/$passes: $impl" >&2
    binding=()
    [ "$impl" = troupe ] || binding=(--cpu-binding none)
    PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$(free_port) "$build/bin/troupe-run" "${binding[@]}" -np 2 "$python" \
      "$here/torch_ops_bench.py" --impl "$impl" --json "$out/ops-$pass-$impl.json"
  done
done
"$python" - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
by = {}
for f in sorted(glob.glob(os.path.join(out, 'ops-*.json'))):
    d = json.load(open(f))
    for row, s in d['rows'].items():
        by.setdefault(row, {}).setdefault(d['impl'], []).append(s * 1e6)
rows = []
print('| call (2 ranks) | troupe.torch µs (passes) | torch.distributed gloo µs (passes) | troupe ÷ torch |')
print('|---|---|---|---|')
for row in sorted(by, key=lambda r: (int(r.split()[1]), r)):
    tr, to = by[row].get('troupe', []), by[row].get('torch', [])
    mt = statistics.median(tr) if tr else None
    mo = statistics.median(to) if to else None
    ratio = '%.2f' % (mt / mo) if mt and mo else '-'
    fmt = lambda v: ' / '.join('%.1f' % x for x in v) or '-'
    print('| %s | **%s** (%s) | **%s** (%s) | %s |' % (
        row, '%.1f' % mt if mt else '-', fmt(tr), '%.1f' % mo if mo else '-', fmt(to), ratio))
    rows.append({'call': row, 'troupe_us': mt, 'torch_us': mo, 'troupe_passes': tr,
                 'torch_passes': to})
json.dump(rows, open(os.path.join(out, 'torch_ops.json'), 'w'), indent=1)
PY
