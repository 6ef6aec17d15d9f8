#!/bin/bash
out=$1; passes=$2; mkdir -p $out
cd /work/main
for p in $(seq 1 $passes); do
  build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__auto.json >/dev/null 2>&1 || echo fail $p auto
  TROUPE_THREAD_AFFINITY=0,1 build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__autopin.json >/dev/null 2>&1 || echo fail $p autopin
  OMPI_MCA_mpi_yield_when_idle=0 build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__before.json >/dev/null 2>&1 || echo fail $p before
done
