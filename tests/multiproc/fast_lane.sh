#!/usr/bin/env bash
# fast_lane.sh TROUPE_RUN CHECK NP STEPS [RUN FLAGS...]
# The fast lane's workload (collective_check fast-lane: cached allreduces in
# random orders, shape and dtype changes, evictions, a mismatch every 50
# steps) on NP ranks of one host, every result checked; then each rank's
# troupe_fast_lane_agreed_total says whether the members agreed on the
# cached allreduces among themselves: at least one per step on every rank
# with the lane on (the default), none with --fast-lane 0 among the flags.
# FAST_LANE_MODE=fast-lane-lru runs that workload instead, and
# FAST_LANE_MIN replaces the least count expected per rank (default STEPS).
# FAST_LANE_FUSED=R: on every rank, the allgathers and the reducescatters
# (two cached ones of each a step) ran as fewer than R collectives per
# tensor (troupe_collective_operations_total against _tensors_total): the
# agreed lists fused them.
set -u
run=$1 check=$2 np=$3 steps=$4
shift 4
mode=${FAST_LANE_MODE:-fast-lane}
least=${FAST_LANE_MIN:-$steps}
here=$(dirname "$0")
. "$here/metrics_lib.sh"
dir=$(mktemp -d)
trap 'touch "$dir/stop"; kill "$job_pid" 2>/dev/null; rm -rf "$dir"' EXIT
base=$(free_base $((np + 1))) || exit 1
# (Not metrics_lib's launch: 100 000 steps take 40 s here, more on a busy
# machine.)
timeout 280 "$run" --timeout 270 --metrics-port "$base" -np "$np" "$@" "$check" "$mode" \
  "$steps" "$dir/stop" > "$dir/job.log" 2>&1 &
job_pid=$!
wait_lines "$dir" 260 "$np" 'PASS fast lane, holding' || exit 1
grep -q FAIL "$dir/job.log" && { cat "$dir/job.log"; exit 1; }
lane_off=0
for flag in "$@"; do [ "$flag" = "0" ] && [ "${prev:-}" = "--fast-lane" ] && lane_off=1; prev=$flag; done
for r in $(seq 0 $((np - 1))); do
  agreed=$(scrape $((base + 1 + r)) | awk '$1 ~ /^troupe_fast_lane_agreed_total/ {print $2}')
  [ -n "$agreed" ] || { echo "FAIL: rank $r has no troupe_fast_lane_agreed_total"; exit 1; }
  agreed=${agreed%.*}
  echo "rank $r: $agreed tensors agreed without the coordinator in $steps steps"
  if [ $lane_off -eq 1 ]; then
    [ "$agreed" -eq 0 ] || { echo "FAIL: rank $r agreed $agreed with the lane off"; exit 1; }
  else
    [ "$agreed" -ge "$least" ] || { echo "FAIL: rank $r agreed only $agreed (at least $least)"; exit 1; }
  fi
  [ -n "${FAST_LANE_FUSED:-}" ] || continue
  page=$(scrape $((base + 1 + r)))
  for op in allgather reducescatter; do
    ratio=$(echo "$page" | awk -v op="op=\"$op\"" '
      index($1, op) && index($1, "status=\"ok\"") {
        if ($1 ~ /^troupe_collective_operations_total/) ops += $2
        if ($1 ~ /^troupe_collective_tensors_total/) tensors += $2
      }
      END { if (tensors > 0) printf "%.3f", ops / tensors }')
    echo "rank $r: ${ratio:-no} $op collectives per tensor"
    awk -v x="${ratio:-9}" -v most="$FAST_LANE_FUSED" 'BEGIN { exit !(x < most) }' ||
      { echo "FAIL: rank $r ran ${ratio:-no} $op collectives per tensor (want fewer than $FAST_LANE_FUSED)"; exit 1; }
  done
done
finish_job "$dir" || exit 1
grep -h "PASS" "$dir/job.log" | head -"$np"
