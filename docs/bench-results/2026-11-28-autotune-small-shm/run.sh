#!/bin/bash
# issue 13: the 200 x 4 KiB row with MPI's allreduces through the host's
# shared segment (3fba7d0), 100 rounds of 40 steps per pass, as
# 2026-11-25-autotune-small/run100.sh.
cd "$(dirname "$0")/../../.."
out=docs/bench-results/2026-11-28-autotune-small-shm
for pass in ${PASSES:-1 2}; do  # passes 3 and 4: PASSES="3 4" at ba5e037
  mkdir -p $out/pass$pass
  build/bin/troupe-run --mpi -np 2 build/bin/autotune_bench --only small_tensors \
    --steps 40 --rounds 100 --log-dir $out/pass$pass > $out/pass$pass.txt 2>&1
  echo "pass $pass exit $?" >> $out/status
done
