#!/usr/bin/env bash
# security.sh TROUPE_RUN CHECK INTRUDER
# A local 2-rank job (everything bounded): every socket troupe-run and its
# ranks listen on is on loopback; each attack of `intruder` on each rank's
# control-plane port is rejected with the rank's memory bounded; then the
# job runs more allreduces and exits 0.
set -u
run=$1 check=$2 intruder=$3
dir=$(mktemp -d)
trap 'touch "$dir/stop"; kill "$job_pid" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { cat "$dir/job.log"; echo "FAIL: $*"; exit 1; }

timeout 90 "$run" --timeout 80 -np 2 --log-level info "$check" attacked 20 "$dir/stop" \
  > "$dir/job.log" 2>&1 &
job_pid=$!
deadline=$((SECONDS + 60))
until [ "$(grep -c 'PASS .* holding' "$dir/job.log")" -ge 2 ]; do
  { [ $SECONDS -lt $deadline ] && kill -0 "$job_pid" 2>/dev/null; } || fail "ranks did not hold"
  sleep 0.1
done

launcher=$(pgrep -P "$job_pid" -x troupe-run) || fail "no troupe-run under $job_pid"
workers=$(pgrep -P "$launcher" | tr '\n' ' ')
[ "$(echo $workers | wc -w)" -eq 2 ] || fail "expected 2 ranks under troupe-run, got '$workers'"

# 1. Listeners: the store, each rank's control plane and Gloo pairs; all on
#    loopback.
pids=$(echo "$launcher $workers" | tr ' ' '\n' | grep . | paste -sd '|')
listening=$(ss -Hltnp | grep -E "pid=($pids),")
echo "$listening"
count=$(echo "$listening" | grep -c .)
[ "$count" -ge 3 ] || fail "found $count listening sockets of the job; expected at least 3"
outside=$(echo "$listening" | awk '{print $4}' | grep -vE '^(127\.[0-9.]+|\[::1\]):[0-9]+$')
[ -z "$outside" ] && echo "PASS: $count listening sockets, all on loopback" ||
  fail "listening beyond loopback: $outside"

# 2. Attacks on each rank's control-plane port.
ports=$(grep -o 'control plane (TLS) listening on 127.0.0.1:[0-9]*' "$dir/job.log" |
        sed 's/.*://')
[ "$(echo $ports | wc -w)" -eq 2 ] || fail "expected 2 TLS control-plane ports, got '$ports'"
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
declare -A before
for w in $workers; do before[$w]=$(rss "$w"); done
for port in $ports; do
  for mode in caf-plain caf-tls basp-header garbage; do
    timeout 30 "$intruder" "$mode" 127.0.0.1 "$port" || fail "$mode on port $port got through"
  done
done
for w in $workers; do
  grown=$(( $(rss "$w") - ${before[$w]} ))
  echo "rank pid $w: resident memory grew by $grown kB"
  [ "$grown" -lt 102400 ] || fail "rank pid $w grew by $grown kB under attack"
done

# 3. The job goes on and completes.
touch "$dir/stop"
wait "$job_pid" || fail "the job did not exit 0 after the attacks"
[ "$(grep -c 'PASS allreduces after the attack' "$dir/job.log")" -eq 2 ] ||
  fail "not every rank ran its allreduces after the attacks"
echo "PASS: every attack rejected, the job completed"
