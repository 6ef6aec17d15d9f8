#!/usr/bin/env bash
# reset_after_loss.sh TROUPE_RUN CHECK NP VICTIM
# VICTIM is killed during a 256 MiB allreduce; every survivor must see that
# allreduce fail, reset() as a world one smaller and pass a checked
# allreduce there (collective_check reset-after-loss).
set -u
run=$1 check=$2 np=$3 victim=$4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout 90 "$run" --timeout 60 -np "$np" "$check" reset-after-loss "$victim" >"$out" 2>&1
cat "$out"
passed=$(grep -c "<stdout>:rank [0-9]*: PASS lost rank $victim" "$out")
if grep -q "<stdout>:rank [0-9]*: FAIL" "$out" || [ "$passed" -ne $((np - 1)) ]; then
  echo "FAIL: $passed of $((np - 1)) survivors reset and passed"
  exit 1
fi
echo "PASS: $passed survivors reset as a world of $((np - 1))"
