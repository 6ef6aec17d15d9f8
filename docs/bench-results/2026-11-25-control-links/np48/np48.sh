#!/bin/bash
# 48 real ranks on this host, TLS, fanout 3, 20 checked steps: before
# (d0eb180: every rank connects to every other, 1,128 TLS connections)
# against after (HEAD: the control tree, at most 4 per rank), alternating.
# Prints the job's wall time, the time from the first rank's start to the
# global set's tree in place, and the handshakes retried.
R=/work/main/docs/bench-results/2026-11-25-control-links/np48
stamp() { date -d "$(echo "$1" | sed -E 's/.*\[([0-9-]+ [0-9:.]+)\].*/\1/')" +%s.%N; }
printf "%-7s %5s %8s %10s %8s\n" build pass wall_s started_s retries
for pass in 1 2 3; do for tree in before after; do
  if [ $tree = before ]; then B=/work/ci-final/build; else B=/work/main/build; fi
  log=$R/$tree-$pass.log
  t0=$(date +%s.%N)
  $B/bin/troupe-run --timeout 250 --start-timeout 120 -np 48 --control-fanout 3 --log-level info \
    $B/bin/collective_check cache 20 > $log 2>&1
  rc=$?
  t1=$(date +%s.%N)
  first=$(grep -m1 "starting:" $log); placed=$(grep -m1 "in place" $log)
  started=$(echo "$(stamp "$placed") - $(stamp "$first")" | bc)
  printf "%-7s %5d %8.2f %10.2f %8d rc=%d passed=%d\n" $tree $pass $(echo "$t1 - $t0" | bc) $started \
    $(grep -c "retrying in" $log) $rc $(grep -c "PASS 20 cached steps" $log)
done; done
