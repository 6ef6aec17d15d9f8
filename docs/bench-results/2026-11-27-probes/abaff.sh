#!/bin/bash
# abaff.sh OUT PASSES BACKEND : --thread-affinity off / 0,1 alternating, one binary
out=$1; passes=$2; be=${3:-mpi}; mkdir -p $out
cd /work/main
for p in $(seq 1 $passes); do
  for v in off on; do
    flags=(); [ $v = on ] && flags=(--thread-affinity 0,1)
    for w in allreduce:4 allreduce:1048576 small_tensors resnet50; do
      n=$(echo $w | tr ':' '_')
      build/bin/troupe-run --$be -np 2 "${flags[@]}" build/bin/allreduce_bench --only $w --rounds 3 --json $out/$n-$v-$p.json >/dev/null 2>&1 || echo fail $v $w $p
    done
  done
done
