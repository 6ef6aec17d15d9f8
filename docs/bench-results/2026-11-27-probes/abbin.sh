#!/bin/bash
# abbin.sh OUT PAIRS WORKLOAD [extra]
out=$1; pairs=$2; w=$3; shift 3; mkdir -p $out
cd /work/main
for p in $(seq 1 $pairs); do
  for v in old new; do
    STATOUT=$out/$v-$p build/bin/troupe-run --mpi -np 2 -- /usr/bin/env STATOUT=$out/$v-$p /tmp/stat2.sh /tmp/ab_$v --only $w --troupe-only --rounds 3 "$@" --json $out/$v-$p.json >/dev/null 2>&1 || echo fail $v $p
  done
done
