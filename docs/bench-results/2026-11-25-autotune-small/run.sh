#!/bin/bash
# issue 13: the 200 x 4 KiB row alone, 25 rounds of 40 steps (a 1 ms step's
# rounds move by more than 5 % between identical settings at 5 rounds)
cd /work/main
out=docs/bench-results/2026-11-25-autotune-small
for pass in 1 2 3; do
  mkdir -p $out/pass$pass
  env TROUPE_LOG_LEVEL=info build/bin/troupe-run --mpi -np 2 build/bin/autotune_bench --only small_tensors \
    --steps 40 --rounds 25 --log-dir $out/pass$pass > $out/pass$pass.txt 2>&1
  echo "pass $pass exit $?" >> $out/status
done
