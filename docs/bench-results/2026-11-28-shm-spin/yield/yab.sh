#!/bin/bash
# A = pause spin 2 ms, B = pause 20 us then yield until 2 ms
mkdir -p /tmp/ab1/y
for i in $(seq 1 $1); do
  for v in A B; do
    B=/tmp/bin$v
    timeout 600 $B/troupe-run --gloo -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json ${OUT:-.}/g-only-$v-$i.json > /dev/null 2>&1 || echo fail
    timeout 600 $B/troupe-run --gloo -np 2 $B/allreduce_bench --rounds 3 --json ${OUT:-.}/g-both-$v-$i.json > /dev/null 2>&1 || echo fail
    timeout 600 $B/troupe-run --mpi -np 2 $B/allreduce_bench --rounds 3 --json ${OUT:-.}/m-both-$v-$i.json > /dev/null 2>&1 || echo fail
  done
done
