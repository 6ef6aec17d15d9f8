#!/bin/bash
# $1: label (before/after); 3 Gloo-mode jobs, 2 MPI jobs and 2 Gloo --shm 0
# jobs of fused_cost.py reducescatter, alternating.
cd /work/main
py="docs/bench-results/2026-11-29-run29/fused_cost.py reducescatter"
for i in 1 2 3; do
  PYTHONPATH=build/python build/bin/troupe-run -np 2 /usr/bin/python3 $py 64x256,64x4096 2>&1 | grep " us" | sed "s/^/$1 gloo $i /"
  [ $i -le 2 ] && PYTHONPATH=build/python build/bin/troupe-run --mpi -np 2 /usr/bin/python3 $py 64x256,64x4096 2>&1 | grep " us" | sed "s/^/$1 mpi $i /"
  [ $i -le 2 ] && PYTHONPATH=build/python build/bin/troupe-run --shm 0 -np 2 /usr/bin/python3 $py 64x256,64x4096 2>&1 | grep " us" | sed "s/^/$1 noshm $i /"
done
