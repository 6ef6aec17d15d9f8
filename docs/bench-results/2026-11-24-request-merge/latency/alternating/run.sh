#!/bin/bash
# Gloo and MPI, 2 ranks, allreduce only, before (e853d03) and after
# alternating 6 times each, one lock hold.
R=/work/main/docs/bench-results/2026-11-24-request-merge/latency/alternating
for pass in 1 2 3 4 5 6; do for tree in before after; do for be in gloo mpi; do
  if [ $tree = before ]; then B=/work/before/build; else B=/work/main/build; fi
  $B/bin/troupe-run --$be -np 2 $B/bin/allreduce_bench --only allreduce --troupe-only --rounds 2 \
    --idle-seconds 1 --json $R/$be-$tree-$pass.json > $R/$be-$tree-$pass.txt 2>&1
done; done; done
