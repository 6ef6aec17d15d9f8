#!/usr/bin/env bash
# The issue-4 benchmark suite in one command, 2 ranks on this host:
#   flock /tmp/troupe-build.lock bash bench/run.sh [--quick] [--passes N] [--rounds N] [--out DIR]
# Each pass runs four jobs one after the other:
#   troupe-run --mpi  allreduce_bench   troupe-mpi and raw MPI_Allreduce, alternating rounds
#   troupe-run --gloo allreduce_bench   troupe-gloo and raw gloo::allreduce, alternating rounds
#   troupe-run --gloo --shm 0 allreduce_bench --only allreduce:4
#                                       troupe-gloo-noshm (over Gloo's TCP) and raw Gloo
#   troupe-run --cpu-binding none python3 torch_bench.py
#                                       torch.distributed (gloo), unbound as torchrun
#                                       runs it (bound, Gloo's TCP is several times slower)
# and report.py pools the passes, prints the markdown tables and writes
# DIR/allreduce.json. Build first: cmake --build build --target allreduce_bench troupe-run.
# Hold the shared lock (as above): numbers taken while something else
# builds or runs on the 2 cores are noise.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${TROUPE_BUILD_DIR:-$here/../build}" && pwd)
python=${PYTHON:-/usr/bin/python3}
passes=2
rounds=3
out=$build/bench-results
quick=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=(--quick); passes=1; rounds=1 ;;
    --passes) passes=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "usage: $0 [--quick] [--passes N] [--rounds N] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
run=$build/bin/troupe-run
bench=$build/bin/allreduce_bench
for f in "$run" "$bench"; do
  [ -x "$f" ] || { echo "$0: $f is missing: build the allreduce_bench and troupe-run targets" >&2; exit 1; }
done
mkdir -p "$out"
rm -f "$out"/pass-*.json
idle=3
[ ${#quick[@]} -eq 0 ] || idle=1

# torch's env:// rendezvous: troupe-run exports RANK and WORLD_SIZE, the
# master address and a free port come from here.
free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start=$(date +%s)
for pass in $(seq 1 "$passes"); do
  for backend in mpi gloo; do
    echo "bench/run.sh: pass $pass/$passes: troupe-$backend" >&2
    "$run" --"$backend" -np 2 "$bench" --rounds "$rounds" --idle-seconds "$idle" "${quick[@]}" \
      --json "$out/pass-$pass-$backend.json"
  done
  # Issue 15's "4 B troupe-gloo <= raw Gloo without the shm path".
  echo "bench/run.sh: pass $pass/$passes: troupe-gloo-noshm" >&2
  "$run" --gloo --shm 0 -np 2 "$bench" --only allreduce:4 --rounds "$rounds" \
    --idle-seconds "$idle" "${quick[@]}" --json "$out/pass-$pass-gloo-noshm.json"
  if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
    echo "bench/run.sh: $python has no torch.distributed (apt-get install python3-torch): no torch column" >&2
    continue
  fi
  echo "bench/run.sh: pass $pass/$passes: torch.distributed" >&2
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) \
    "$run" --cpu-binding none -np 2 "$python" "$here/torch_bench.py" --rounds "$rounds" "${quick[@]}" \
    --json "$out/pass-$pass-torch.json"
done
echo "bench/run.sh: measured in $(($(date +%s) - start)) s" >&2
"$python" "$here/report.py" --json "$out/allreduce.json" "$out"/pass-*.json
echo "bench/run.sh: all rows in $out/allreduce.json" >&2
