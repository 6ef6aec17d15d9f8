#!/usr/bin/env bash
# stall.sh TROUPE_RUN CHECK gloo|mpi
# The last rank withholds a tensor. With a 1 s warning and a 3 s shutdown
# time, rank 0 must warn naming the tensor and the missing rank, the others
# must see the tensor fail instead of hanging, and the job must go on.
set -u
run=$1 check=$2 backend=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout 90 "$run" "--$backend" --timeout 60 -np 3 --stall-check-time-seconds 1 \
  --stall-shutdown-time-seconds 3 "$check" stall >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: job exited $rc"; exit 1; }
grep -q "Missing ranks:" "$out" || { echo "FAIL: no stall warning"; exit 1; }
grep -q "2: \[stall.withheld\]" "$out" || { echo "FAIL: warning does not name rank 2 and the tensor"; exit 1; }
[ "$(grep -c 'PASS stalled tensor failed' "$out")" -eq 3 ] || { echo "FAIL: not every rank passed"; exit 1; }
echo "PASS: stall warned, failed the withheld tensor, job went on ($backend)"
