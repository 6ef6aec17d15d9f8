#!/bin/bash
# issue 13 benchmark after the chunk stage (f972c30): 3 passes, 5 rounds
cd /work/main
for pass in 1 2 3; do
  mkdir -p /tmp/at25/pass$pass
  env TROUPE_LOG_LEVEL=info build/bin/troupe-run --mpi -np 2 build/bin/autotune_bench --steps 40 --rounds 5 --log-dir /tmp/at25/pass$pass > /tmp/at25/pass$pass.txt 2>&1
  echo "pass $pass exit $?" >> /tmp/at25/status
done
