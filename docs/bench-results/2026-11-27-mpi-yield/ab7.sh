#!/bin/bash
out=$1; passes=$2; mkdir -p $out
cd /work/main
for p in $(seq 1 $passes); do
  OMPI_MCA_mpi_yield_when_idle=1 build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__y1sleep.json >/dev/null 2>&1 || echo fail $p a
  XCAF_KEEP=1 OMPI_MCA_mpi_yield_when_idle=1 build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__y1poll.json >/dev/null 2>&1 || echo fail $p b
  build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__y0.json >/dev/null 2>&1 || echo fail $p c
done
