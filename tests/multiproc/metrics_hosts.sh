#!/usr/bin/env bash
# metrics_hosts.sh TROUPE_RUN CHECK
# Two troupe-run "hosts" that are both this machine (-H localhost:2,
# 127.0.0.1:2) with --metrics-port BASE: the four ranks serve on BASE+1 ..
# BASE+4, one rank each (they used to collide on BASE+1 and BASE+2, and the
# job failed).
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
job_dir
base=$(free_base 5) || exit 1
launch "$run" "$dir" "$base" -np 4 -H localhost:2,127.0.0.1:2 "$check" hold 3 "$dir/stop"
wait_lines "$dir" 60 4 'PASS .* holding' || exit 1
for r in 0 1 2 3; do
  scrape $((base + 1 + r)) > "$dir/$r.txt" || { echo "FAIL: nothing on port $((base + 1 + r))"; exit 1; }
  check_lines "$dir/$r.txt" "troupe_rank $r" || exit 1
done
finish_job "$dir" || exit 1
echo "PASS: ranks of two local hosts serve on four distinct ports"
