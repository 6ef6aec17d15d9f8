#!/usr/bin/env bash
# metrics_mpi.sh TROUPE_RUN CHECK
# troupe-run --mpi with --metrics-port serves the launcher's metrics on
# BASE (mpirun stands for its ranks) beside the ranks' on BASE + 1 + local
# rank, all promtool-clean; the job's exit status is mpirun's.
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
job_dir
n=50
base=$(free_base 3) || exit 1
launch "$run" "$dir" "$base" --mpi -np 2 "$check" hold "$n" "$dir/stop"
wait_holding "$dir" 60 || exit 1
for port in "$base" $((base + 1)) $((base + 2)); do
  scrape "$port" > "$dir/$port.txt" || { echo "FAIL: no answer on $port"; exit 1; }
  command -v promtool > /dev/null && { promtool check metrics < "$dir/$port.txt" || exit 1; }
done
check_lines "$dir/$base.txt" "troupe_launcher_workers 2" "troupe_launcher_workers_running 2" \
  "troupe_launcher_worker_exits_total{outcome=\"success\"} 0" || exit 1
check_lines "$dir/$((base + 1)).txt" \
  "troupe_collective_tensors_total{backend=\"mpi\",op=\"allreduce\",process_set=\"0\",status=\"ok\"} $n" \
  || exit 1
finish_job "$dir" || exit 1
echo "PASS: troupe-run --mpi serves launcher metrics beside its ranks'"
