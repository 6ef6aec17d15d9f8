# Shared by the metrics_*.sh tests (sourced). Starts a 2-rank job whose
# ranks run a known number of checked allreduces and then hold until told
# to stop, with /metrics on a free port range. Everything is bounded.

# free_base COUNT: prints a base port whose COUNT consecutive ports are free.
free_base() {
  /usr/bin/python3 - "$1" <<'PY'
import random, socket, sys
count = int(sys.argv[1])
for _ in range(50):
    base = random.randrange(21000, 29000)
    socks = []
    try:
        for p in range(base, base + count):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", p))
        print(base)
        sys.exit(0)
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
sys.exit("no free port range")
PY
}

# start_job RUN CHECK DIR BASE N: job in the background; pid in $job_pid.
start_job() {
  local run=$1 check=$2 dir=$3 base=$4 n=$5
  rm -f "$dir/stop"
  timeout 90 "$run" --timeout 80 -np 2 --metrics-port "$base" "$check" hold "$n" "$dir/stop" \
    > "$dir/job.log" 2>&1 &
  job_pid=$!
}

# wait_holding DIR SECONDS: both ranks finished their allreduces.
wait_holding() {
  local deadline=$((SECONDS + $2))
  until [ "$(grep -c 'PASS .* holding' "$1/job.log")" -ge 2 ]; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 "$job_pid" 2>/dev/null; then
      cat "$1/job.log"; echo "FAIL: ranks did not reach the hold"; return 1
    fi
    sleep 0.1
  done
}

# finish_job DIR: lets the ranks exit and checks the job succeeded.
finish_job() {
  touch "$1/stop"
  if ! wait "$job_pid"; then
    cat "$1/job.log"; echo "FAIL: job did not exit 0"; return 1
  fi
}

# scrape PORT: the body of GET /metrics (5 s at most).
scrape() {
  curl -sf -m 5 "http://127.0.0.1:$1/metrics"
}
