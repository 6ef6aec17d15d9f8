#!/bin/bash
# $1: label; 3 Gloo jobs with --shm 0 (Gloo's TCP) of reducescatter_cost.py
cd /work/main
for i in 1 2 3; do
  PYTHONPATH=build/python build/bin/troupe-run --shm 0 -np 2 /usr/bin/python3 docs/bench-results/2026-11-29-run28/reducescatter_cost.py 1,16 2>&1 | grep MiB | sed "s/^/$1 gloo-noshm $i /"
done
