#!/usr/bin/env bash
# log_format.sh TROUPE_RUN CHECK
# Log lines carry their date and time, except with horovodrun's
# --log-without-timestamp (HOROVOD_LOG_HIDE_TIME).
set -u
run=$1 check=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 60 "$run" --timeout 50 -np 1 --log-level info "$check" ops > "$dir/with.log" 2>&1 \
  || { cat "$dir/with.log"; echo "FAIL: run"; exit 1; }
grep -Eq '^\[0\]<stderr>:\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+\] \[troupe\] \[info\] troupe rank 0/1 starting' \
  "$dir/with.log" || { cat "$dir/with.log"; echo "FAIL: no timestamped line"; exit 1; }
HOROVOD_LOG_HIDE_TIME=1 timeout 60 "$run" --timeout 50 -np 1 --log-level info "$check" ops \
  > "$dir/without.log" 2>&1 || { cat "$dir/without.log"; echo "FAIL: run"; exit 1; }
grep -q '^\[0\]<stderr>:\[troupe\] \[info\] troupe rank 0/1 starting' "$dir/without.log" \
  || { cat "$dir/without.log"; echo "FAIL: time not hidden"; exit 1; }
echo "PASS: log lines with and without their time"
