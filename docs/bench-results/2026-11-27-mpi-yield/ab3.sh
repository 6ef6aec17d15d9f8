#!/bin/bash
# usage: ab3.sh OUTDIR passes cfg... ; cfg: <b><y><m> b=M|G, y=0|1, m=-|N (XCAF_MOD)
out=$1; passes=$2; shift 2; mkdir -p $out
cd /work/main
for p in $(seq 1 $passes); do
 for c in "$@"; do
   b=${c:0:1}; y=${c:1:1}; m=${c:2}
   if [ "$m" = "-" ]; then unset XCAF_MOD; else export XCAF_MOD=$m; fi
   be=mpi; [ $b = G ] && be=gloo
   OMPI_MCA_mpi_yield_when_idle=$y build/bin/troupe-run --$be -np 2 build/bin/allreduce_bench --troupe-only --rounds 3 --idle-seconds 1 --json $out/j${p}__${c}.json >/dev/null 2>&1 || echo fail $p $c
 done
done
