#!/bin/bash
# abbin2.sh OUT PAIRS : old/new alternating, several workloads, troupe + raw in same job
out=$1; pairs=$2; mkdir -p $out
cd /work/main
for p in $(seq 1 $pairs); do
  for v in old new; do
    for w in allreduce:4 allreduce:1048576 small_tensors resnet50; do
      n=$(echo $w | tr ':' '_')
      build/bin/troupe-run --mpi -np 2 /tmp/ab_$v --only $w --rounds 3 --json $out/$n-$v-$p.json >/dev/null 2>&1 || echo fail $v $w $p
    done
  done
done
