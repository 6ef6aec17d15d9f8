#!/bin/bash
# usage: ab.sh OUTDIR passes  -- alternates yield on/off
out=$1; passes=$2; mkdir -p $out
for p in $(seq 1 $passes); do
 for y in 0 1 2; do
  for w in allreduce:4 allreduce:1048576 small_tensors resnet50; do
    n=$(echo $w | tr ':' '_')
    OMPI_MCA_mpi_yield_when_idle=$([ $y = 1 ] && echo 1 || echo 0) XNB=$([ $y = 2 ] && echo 1 || echo 0) build/bin/troupe-run --mpi -np 2 build/bin/allreduce_bench --only $w --rounds 3 --json $out/$n-y$y-$p.json >/dev/null 2>&1 || echo fail $w $y
  done
 done
done
