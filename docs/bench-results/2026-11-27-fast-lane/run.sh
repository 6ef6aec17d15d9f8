#!/bin/bash
# issue 15 item 1: bench/run.sh with the fast lane on, then off, one pass
# each, then a 4-byte timeline of each for bench/timeline_hops.py
# (run under flock /tmp/troupe-build.lock, from the repository root)
out=${1:-/tmp/bench}
for lane in 1 0; do
  TROUPE_FAST_LANE=$lane bash bench/run.sh --passes 1 --out $out/lane$lane > $out/lane$lane.log 2>&1
done
for lane in 1 0; do
  mkdir -p $out/tl$lane
  TROUPE_FAST_LANE=$lane TROUPE_TIMELINE=$out/tl$lane/t.json build/bin/troupe-run --mpi -np 2 \
    build/bin/allreduce_bench --only allreduce:4 --troupe-only --rounds 1 --json $out/tl$lane/x.json
  /usr/bin/python3 bench/timeline_hops.py $out/tl$lane/t.*.json > $out/hops$lane.txt
done
