#!/bin/bash
# $1: label (before/after); 3 Gloo-mode jobs and 2 MPI jobs of average_cost.py, alternating
cd /work/main
for i in 1 2 3; do
  PYTHONPATH=build/python build/bin/troupe-run -np 2 /usr/bin/python3 docs/bench-results/2026-11-29-run28/average_cost.py 1,16,64,97 2>&1 | grep MiB | sed "s/^/$1 gloo $i /"
  [ $i -le 2 ] && PYTHONPATH=build/python build/bin/troupe-run --mpi -np 2 /usr/bin/python3 docs/bench-results/2026-11-29-run28/average_cost.py 1,16,64,97 2>&1 | grep MiB | sed "s/^/$1 mpi $i /"
done
