#!/usr/bin/env bash
# timeline.sh TROUPE_RUN CHECK
# 1. Every rank writes its own trace; each parses as JSON, has Horovod's
#    event names and balanced spans.
# 2. A rank SIGKILLed mid-run leaves a trace that still parses.
set -u
run=$1 check=$2
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 90 "$run" --timeout 60 -np 2 --timeline-filename "$dir/trace.json" "$check" ops \
  > "$dir/ops.log" 2>&1 || { cat "$dir/ops.log"; echo "FAIL: ops run"; exit 1; }
/usr/bin/python3 "$here/timeline_check.py" "$dir/trace.0.json" "$dir/trace.1.json" --names \
  NEGOTIATE_ALLREDUCE,ALLREDUCE,NEGOTIATE_ALLGATHER,ALLGATHER,BROADCAST,ALLTOALL,REDUCESCATTER,BARRIER \
  || exit 1
timeout 90 "$run" --timeout 60 -np 3 --timeline-filename "$dir/killed.json" "$check" \
  lose-peer kill 2 "$dir/stamp" > "$dir/kill.log" 2>&1
/usr/bin/python3 "$here/timeline_check.py" --allow-open "$dir/killed.0.json" \
  "$dir/killed.1.json" "$dir/killed.2.json" --names NEGOTIATE_ALLREDUCE || exit 1
echo "PASS: per-rank timelines parse, also after SIGKILL"
