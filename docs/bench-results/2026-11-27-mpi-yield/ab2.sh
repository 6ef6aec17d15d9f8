#!/bin/bash
# usage: ab2.sh OUTDIR passes cfg... ; cfg like y1m0 (yield 1, XCAF_MOD 0) or y0m- (no MOD)
out=$1; passes=$2; shift 2; mkdir -p $out
cd /work/main
for p in $(seq 1 $passes); do
 for c in "$@"; do
   y=${c:1:1}; m=${c:3}
   if [ "$m" = "-" ]; then unset XCAF_MOD; else export XCAF_MOD=$m; fi
   OMPI_MCA_mpi_yield_when_idle=$y build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__${c}.json >/dev/null 2>&1 || echo fail $p $c
 done
done
