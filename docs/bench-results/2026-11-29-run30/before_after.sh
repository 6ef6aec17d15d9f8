#!/usr/bin/env bash
# Small and large collectives from Python over Gloo's TCP path (--shm 0), 2
# ranks, JOBS jobs each; run once per build (before / after the links):
#   flock /tmp/troupe-build.lock bash docs/bench-results/2026-11-29-run30/before_after.sh LABEL [JOBS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
label=$1
jobs=${2:-2}
run() {
  PYTHONPATH=build/python build/bin/troupe-run -np 2 --shm 0 /usr/bin/python3 "$@" 2>&1 |
    grep '^\[0\]<stdout>' | sed "s/^\[0\]<stdout>:/$label: /"
}
for j in $(seq 1 "$jobs"); do
  run "$here/small_ops.py"
  for op in allreduce allgather alltoall; do
    run "$here/op_sizes.py" "$op"
  done
done
