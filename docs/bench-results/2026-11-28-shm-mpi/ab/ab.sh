#!/bin/bash
# alternating jobs: TROUPE_SHM=1 (new shm path under MPI) vs 0 (MPI_Allreduce)
B=${B:-build/bin}; OUT=${OUT:-.}
for i in $(seq 1 ${1:-3}); do
  for s in 1 0; do
    timeout 600 $B/troupe-run --mpi -np 2 --shm $s $B/allreduce_bench --rounds 3 --json $OUT/shm$s-$i.json > $OUT/shm$s-$i.log 2>&1 || echo fail $s $i
  done
done
