#!/usr/bin/env bash
# every_rank_says.sh COUNT PATTERN COMMAND...
# Runs COMMAND (bounded by 60 s) and passes when exactly COUNT lines of its
# output match PATTERN (grep -E): e.g. every rank of a job that must fail
# reporting the same reason, each in its own words.
set -u
count=$1 pattern=$2
shift 2
out=$(timeout 60 "$@" 2>&1)
rc=$?
echo "$out"
echo "exit status $rc"
if [ "$rc" -eq 124 ]; then
  echo "FAIL: the job did not end within 60 s"
  exit 1
fi
got=$(grep -cE -- "$pattern" <<<"$out")
if [ "$got" -ne "$count" ]; then
  echo "FAIL: $got lines match '$pattern', want $count"
  exit 1
fi
echo "PASS: $count lines say it"
