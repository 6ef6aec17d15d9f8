#!/bin/bash
# Before (d0eb180: a full mesh of control connections) vs after (HEAD: the
# control links), alternating, 2 and 8 ranks, both backends, 4-byte
# allreduce and 200 x 4 KiB, under one lock hold.
R=/work/main/docs/bench-results/2026-11-25-control-links/latency
for pass in 1 2 3; do for tree in before after; do for np in 2 8; do for be in mpi gloo; do
  if [ $tree = before ]; then B=/work/ci-final/build; else B=/work/main/build; fi
  for only in allreduce:4 small_tensors; do
    $B/bin/troupe-run --$be -np $np $B/bin/allreduce_bench --rounds 2 --idle-seconds 1 \
      --only $only --json $R/$be-np$np-${only%%:*}-$tree-$pass.json > $R/$be-np$np-${only%%:*}-$tree-$pass.txt 2>&1
  done
done; done; done; done
echo finished
