#!/usr/bin/env bash
# security.sh TROUPE_RUN CHECK INTRUDER
# A local 2-rank job (everything bounded): every socket troupe-run and its
# ranks listen on is on loopback; each attack of `intruder` on each rank's
# control-plane port is rejected with the rank's memory bounded; 100 silent
# connections to each port are all closed within 10 s (the rank's TLS
# handshake deadline is 5 s) while the rank holds at most 64 of them (its cap
# on pending handshakes); then the job runs more allreduces and exits 0.
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
fds() { ls "/proc/$1/fd" | wc -l; }
for port in $ports; do
  owner=$(ss -Hltnp "sport = :$port" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
  [ -n "$owner" ] || fail "no process listens on port $port"
  base=$(fds "$owner")
  timeout 30 "$intruder" idle 127.0.0.1 "$port" 100 > "$dir/idle.log" 2>&1 &
  idle_pid=$!
  sleep 2  # all connected and accepted, none past the 5 s deadline
  held=$(( $(fds "$owner") - base ))
  wait "$idle_pid"
  idle_rc=$?
  left=$(( $(fds "$owner") - base ))
  cat "$dir/idle.log"
  echo "rank pid $owner: $held more descriptors while 100 silent connections were open," \
       "$left more after"
  [ "$idle_rc" -eq 0 ] || fail "silent connections to port $port were not all closed"
  [ "$held" -lt 80 ] || fail "rank pid $owner held $held descriptors for 100 silent connections"
  [ "$left" -lt 8 ] || fail "rank pid $owner kept $left descriptors after the silent connections"
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
[ "$(grep -c 'have not completed their TLS handshake' "$dir/job.log")" -eq 2 ] ||
  fail "expected each rank to log its cap on pending handshakes once"
echo "PASS: every attack rejected, the job completed"
