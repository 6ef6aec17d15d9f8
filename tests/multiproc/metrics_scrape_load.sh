#!/usr/bin/env bash
# metrics_scrape_load.sh TROUPE_RUN CHECK
# Both ranks are scraped in a tight loop while they run checked allreduces:
# every value stays right (the ranks check them), scrapes answer quickly,
# and at least one scrape lands mid-run (0 < count < N) so the overlap is
# real. Bounded: 2000 scrapes or 60 s.
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
job_dir
n=4000
base=$(free_base 3) || exit 1
start_job "$run" "$check" "$dir" "$base" "$n"
line='troupe_collective_tensors_total{backend="gloo",op="allreduce",process_set="0",status="ok"}'
scrapes=0 mid_run=0 slowest=0
deadline=$((SECONDS + 60))
while [ $scrapes -lt 2000 ] && [ $SECONDS -lt $deadline ] \
      && [ "$(grep -c 'PASS .* holding' "$dir/job.log")" -lt 2 ]; do
  for port in $((base + 1)) $((base + 2)); do
    start=$(date +%s%N)
    body=$(scrape "$port") || continue  # not serving yet, or already done
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    [ $ms -gt $slowest ] && slowest=$ms
    scrapes=$((scrapes + 1))
    count=$(grep -F "$line" <<< "$body" | awk '{print $2}')
    [ -n "$count" ] && [ "$count" -gt 0 ] && [ "$count" -lt $n ] && mid_run=$((mid_run + 1))
  done
done
wait_holding "$dir" 60 || exit 1
grep 'PASS' "$dir/job.log"
echo "$scrapes scrapes, $mid_run during the allreduces, slowest ${slowest} ms"
[ $mid_run -gt 0 ] || { echo "FAIL: no scrape overlapped the collectives"; exit 1; }
[ $slowest -lt 2000 ] || { echo "FAIL: a scrape took ${slowest} ms"; exit 1; }
for port in $((base + 1)) $((base + 2)); do
  scrape "$port" | grep -qxF "$line $n" || { echo "FAIL: final count on $port"; exit 1; }
done
finish_job "$dir" || exit 1
echo "PASS: concurrent scraping changed no result and blocked no collective"
