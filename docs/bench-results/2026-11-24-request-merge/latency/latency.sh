#!/bin/bash
# Before (e853d03: requests held by value) vs after (HEAD: shared requests,
# the merger), alternating, 2 ranks, both backends, under one lock hold.
R=/work/main/docs/bench-results/2026-11-24-request-merge/latency
for pass in 1 2; do for tree in before after; do for be in mpi gloo; do
  if [ $tree = before ]; then B=/work/before/build; else B=/work/main/build; fi
  $B/bin/troupe-run --$be -np 2 $B/bin/allreduce_bench --rounds 2 --idle-seconds 1 --json $R/$be-$tree-$pass.json > $R/$be-$tree-$pass.txt 2>&1
done; done; done
echo finished
