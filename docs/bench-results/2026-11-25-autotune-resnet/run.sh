#!/bin/bash
# issue 13: the ResNet-50 row with the settings in a shuffled order per round
# (as 2026-11-25-autotune-small passes 6-8), 15 rounds of 40 steps
# (run.sh [OUT]: into OUT, by default here)
cd /work/main
out=${1:-docs/bench-results/2026-11-25-autotune-resnet}
for pass in 1 2 3; do
  mkdir -p $out/pass$pass
  env TROUPE_LOG_LEVEL=info build/bin/troupe-run --mpi -np 2 build/bin/autotune_bench --only resnet50 \
    --steps 40 --rounds 15 --log-dir $out/pass$pass > $out/pass$pass.txt 2>&1
  echo "pass $pass exit $?" >> $out/status
done
