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
# 1b. Horovod's --timeline-mark-cycles: CYCLE_START markers from the start,
#     for the coordinator's lists and the fast lane's agreed lists alike.
timeout 90 "$run" --timeout 60 -np 2 --timeline-filename "$dir/marked.json" \
  --timeline-mark-cycles "$check" fast-lane 200 > "$dir/marked.log" 2>&1 \
  || { cat "$dir/marked.log"; echo "FAIL: marked run"; exit 1; }
/usr/bin/python3 "$here/timeline_check.py" "$dir/marked.0.json" "$dir/marked.1.json" --names \
  NEGOTIATE_ALLREDUCE,ALLREDUCE,CYCLE_START || exit 1
marks=$(grep -o CYCLE_START "$dir/marked.0.json" | wc -l)
[ "$marks" -ge 200 ] || { echo "FAIL: $marks cycle markers in 200 steps"; exit 1; }
timeout 90 "$run" --timeout 60 -np 3 --timeline-filename "$dir/killed.json" "$check" \
  lose-peer kill 2 "$dir/stamp" > "$dir/kill.log" 2>&1
/usr/bin/python3 "$here/timeline_check.py" --allow-open "$dir/killed.0.json" \
  "$dir/killed.1.json" "$dir/killed.2.json" --names NEGOTIATE_ALLREDUCE || exit 1
# 3. Dynamic timeline: only what runs between start and stop is written,
#    with cycle markers and the backend's activities, on both backends:
#    through the host's shared segment (the default) a fused allreduce's
#    tensors are reduced where they lie, with --shm 0 through the fusion
#    buffer (its copies are spans too); refused without TROUPE_TIMELINE.
for backend in gloo mpi; do
  upper=$(tr a-z A-Z <<< "$backend")
  for shm in 1 0; do
    names=NEGOTIATE_ALLREDUCE,ALLREDUCE,CYCLE_START,${upper}_ALLREDUCE,${upper}_ALLGATHER
    [ "$shm" = 0 ] && names=$names,MEMCPY_IN_FUSION_BUFFER,MEMCPY_OUT_FUSION_BUFFER
    TROUPE_TIMELINE=DYNAMIC timeout 90 "$run" --timeout 60 "--$backend" --shm "$shm" -np 2 \
      "$check" timeline-dynamic "$dir/dyn-$backend-$shm.json" > "$dir/dyn.log" 2>&1 \
      || { cat "$dir/dyn.log"; echo "FAIL: dynamic run ($backend, shm $shm)"; exit 1; }
    /usr/bin/python3 "$here/timeline_check.py" "$dir/dyn-$backend-$shm.0.json" \
      "$dir/dyn-$backend-$shm.1.json" --no-rows before.,after. --names "$names" || exit 1
  done
done
timeout 60 "$run" --timeout 30 -np 2 "$check" timeline-dynamic "$dir/refused.json" \
  > "$dir/refused.log" 2>&1 || { cat "$dir/refused.log"; echo "FAIL: not refused"; exit 1; }
echo "PASS: per-rank timelines parse, also after SIGKILL; dynamic start/stop"
