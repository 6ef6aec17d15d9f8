# Shared by the metrics_*.sh tests (sourced). Starts a job whose ranks run
# a known number of checked allreduces and then hold until told to stop,
# with /metrics on a free port range. Everything is bounded.

# job_dir: sets `dir` to a fresh directory; at exit the job is told to stop
# (and killed) and the directory removed.
job_dir() {
  dir=$(mktemp -d)
  trap 'touch "$dir/stop"; kill "$job_pid" 2>/dev/null; rm -rf "$dir"' EXIT
}

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

# launch RUN DIR BASE ARGS...: `RUN --metrics-port BASE ARGS...` in the
# background (80 s at most); pid in $job_pid, output in DIR/job.log.
launch() {
  local run=$1 dir=$2 base=$3
  shift 3
  rm -f "$dir/stop"
  timeout 90 "$run" --timeout 80 --metrics-port "$base" "$@" > "$dir/job.log" 2>&1 &
  job_pid=$!
}

# start_job RUN CHECK DIR BASE N: 2 ranks run N allreduces and hold.
start_job() {
  launch "$1" "$3" "$4" -np 2 "$2" hold "$5" "$3/stop"
}

# wait_lines DIR SECONDS COUNT PATTERN: COUNT lines of the job match PATTERN.
wait_lines() {
  local deadline=$((SECONDS + $2))
  until [ "$(grep -c "$4" "$1/job.log")" -ge "$3" ]; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 "$job_pid" 2>/dev/null; then
      cat "$1/job.log"; echo "FAIL: ranks did not print '$4'"; return 1
    fi
    sleep 0.1
  done
}

# wait_holding DIR SECONDS: both ranks finished their allreduces.
wait_holding() {
  wait_lines "$1" "$2" 2 'PASS .* holding'
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

# check_lines FILE LINES...: FILE has every line exactly.
check_lines() {
  local f=$1 line
  shift
  for line in "$@"; do
    grep -qxF "$line" "$f" || { echo "FAIL: $f lacks '$line'"; return 1; }
  done
}
