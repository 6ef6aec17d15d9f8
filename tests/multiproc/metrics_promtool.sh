#!/usr/bin/env bash
# metrics_promtool.sh TROUPE_RUN CHECK
# A running 2-rank job: the launcher (BASE) and each rank (BASE + 1 + local
# rank) serve /metrics as text/plain, 404 elsewhere; every
# exposition is clean for `promtool check metrics` and counts exactly the
# allreduces the ranks ran (ten names: ten cache misses, the rest hits); the
# ports are free again after the job, and
# init() after shutdown() binds its port again.
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
command -v promtool > /dev/null || { echo "SKIP: promtool not installed"; exit 77; }
job_dir
n=300
base=$(free_base 3) || exit 1
start_job "$run" "$check" "$dir" "$base" "$n"
wait_holding "$dir" 60 || exit 1
for port in "$base" $((base + 1)) $((base + 2)); do
  headers=$(curl -s -m 5 -o "$dir/$port.txt" -D - "http://127.0.0.1:$port/metrics") \
    || { echo "FAIL: no answer on $port"; exit 1; }
  grep -qi '^content-type: text/plain' <<< "$headers" \
    || { echo "$headers"; echo "FAIL: content type on $port"; exit 1; }
  promtool check metrics < "$dir/$port.txt" \
    || { echo "FAIL: promtool on port $port"; exit 1; }
  code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/other")
  [ "$code" = 404 ] || { echo "FAIL: /other on $port answered $code"; exit 1; }
  echo "port $port: $(wc -c < "$dir/$port.txt") bytes, promtool clean"
done
grep -qx 'troupe_launcher_workers_running 2' "$dir/$base.txt" \
  || { cat "$dir/$base.txt"; echo "FAIL: launcher metrics"; exit 1; }
for r in 0 1; do
  check_lines "$dir/$((base + 1 + r)).txt" "troupe_rank $r" "troupe_world_size 2" \
    "troupe_collective_tensors_total{backend=\"gloo\",op=\"allreduce\",process_set=\"0\",status=\"ok\"} $n" \
    "troupe_negotiation_duration_seconds_count{process_set=\"0\"} $n" \
    "troupe_cycles_total{process_set=\"0\"} $n" \
    "troupe_response_cache_misses_total{process_set=\"0\"} 10" \
    "troupe_response_cache_hits_total{process_set=\"0\"} $((n - 10))" || exit 1
done
finish_job "$dir" || exit 1
/usr/bin/python3 - "$base" <<'PY' || { echo "FAIL: a metrics port is still bound"; exit 1; }
import socket, sys
base = int(sys.argv[1])
for p in range(base, base + 3):
    s = socket.socket()  # SO_REUSEADDR as servers do: TIME_WAIT is fine, a listener is not
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", p))
PY
TROUPE_METRICS_PORT=$base timeout 30 "$check" reinit || { echo "FAIL: reinit"; exit 1; }
echo "PASS: launcher and both ranks serve promtool-clean metrics with exact counts"
