#!/usr/bin/env bash
# metrics_sets.sh TROUPE_RUN CHECK
# A 4-rank job with process sets [0, 1] (id 1) and [1, 2, 3] (id 2) beside
# the global set: each rank's series carry the right process_set label, bus
# bytes use the set's size (1000-byte allreduces: 1500 per op on 4 ranks,
# 1000 on 2, 1333 on 3), queue depths are per set, and every exposition is
# promtool-clean. After set 1 is removed its series are gone from every
# rank, set 2's stay.
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
dir=$(mktemp -d)
trap 'touch "$dir/remove" "$dir/stop"; kill "$job_pid" 2>/dev/null; rm -rf "$dir"' EXIT
n=20
base=$(free_base 5) || exit 1
TROUPE_DYNAMIC_PROCESS_SETS=1 launch "$run" "$dir" "$base" -np 4 "$check" set-metrics "$n" "$dir"
wait_lines "$dir" 60 4 'PASS .* per set, holding' || exit 1
# bus_line SET FACTOR_BYTES: the allreduce bus-bytes line of one set.
bus_line() {
  echo "troupe_collective_bus_bytes_total{backend=\"gloo\",op=\"allreduce\",process_set=\"$1\",status=\"ok\"} $(($2 * n))"
}
# Members per set: 0 = all, 1 = ranks 0 and 1, 2 = ranks 1 to 3.
for r in 0 1 2 3; do
  f=$dir/$r.txt
  scrape $((base + 1 + r)) > "$f" || { echo "FAIL: no answer from rank $r"; exit 1; }
  command -v promtool > /dev/null && { promtool check metrics < "$f" || exit 1; }
  check_lines "$f" "$(bus_line 0 1500)" "troupe_tensor_queue_depth{process_set=\"0\"} 0" \
    "troupe_collective_bytes_total{backend=\"gloo\",op=\"allreduce\",process_set=\"0\",status=\"ok\"} $((1000 * n))" \
    || exit 1
  [ $r -le 1 ] && { check_lines "$f" "$(bus_line 1 1000)" \
                      "troupe_tensor_queue_depth{process_set=\"1\"} 0" || exit 1; }
  [ $r -ge 1 ] && { check_lines "$f" "$(bus_line 2 1333)" \
                      "troupe_tensor_queue_depth{process_set=\"2\"} 0" || exit 1; }
  [ $r -gt 1 ] && grep -q 'process_set="1"' "$f" && { echo "FAIL: rank $r has set 1"; exit 1; }
  [ $r -eq 0 ] && grep -q 'process_set="2"' "$f" && { echo "FAIL: rank 0 has set 2"; exit 1; }
done
echo "per-set series and bus factors right on all 4 ranks"
touch "$dir/remove"
wait_lines "$dir" 60 4 'PASS set 1 removed' || exit 1
# The set's actors wind down after remove_process_set() returns.
for r in 0 1 2 3; do
  deadline=$((SECONDS + 10))
  while scrape $((base + 1 + r)) > "$dir/$r.txt" && grep -q 'process_set="1"' "$dir/$r.txt"; do
    [ $SECONDS -lt $deadline ] || { echo "FAIL: rank $r still has set 1's series"; exit 1; }
    sleep 0.2
  done
  [ $r -ge 1 ] && { check_lines "$dir/$r.txt" "$(bus_line 2 1333)" || exit 1; }
done
finish_job "$dir" || exit 1
echo "PASS: per-set labels and bus bytes right; a removed set's series are gone"
