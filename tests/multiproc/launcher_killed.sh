#!/usr/bin/env bash
# launcher_killed.sh TROUPE_RUN CHECK
# SIGKILL of troupe-run leaves no worker behind (they used to train on as
# orphans): within 2 s, direct children are gone by their parent-death
# signal, and ranks started through a shell (grandchildren) by losing
# troupe-run's store.
set -u
marker=
run=$1 check=$2
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; pkill -KILL -f "$dir/" 2>/dev/null; pkill -KILL -f "$marker" 2>/dev/null; rm -rf "$dir"' EXIT

# kill_and_check NAME MARKER: SIGKILL troupe-run; every process whose
# command line holds MARKER is gone within 2 s.
kill_and_check() {
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  pid=
  local deadline=$(($(date +%s%N) + 2000000000))
  for _ in $(seq 200); do
    pgrep -f "$2" > /dev/null || { echo "$1: workers gone"; return 0; }
    [ "$(date +%s%N)" -lt $deadline ] || break
    sleep 0.05
  done
  ps -ef | grep -F "$2" | grep -v grep
  fail "$1: workers still running 2 s after troupe-run was killed"
}

# wait_for PATTERN COUNT: COUNT lines of the job's output match PATTERN.
wait_for() {
  for _ in $(seq 300); do
    [ "$(grep -c "$1" "$dir/log")" -ge "$2" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$dir/log"; fail "job ended early"; }
    sleep 0.1
  done
  cat "$dir/log"; fail "no '$1' from the workers"
}

# Direct children that never call init(): the parent-death signal.
marker="sleep 29.$$$RANDOM"
"$run" -np 2 sh -c "echo started; exec $marker" > "$dir/log" 2>&1 &
pid=$!
wait_for started 2
kill_and_check "direct children" "$marker"

# Ranks whose parent is a shell that troupe-run started: the shell dies by
# its parent-death signal, the ranks by losing the store.
"$run" -np 2 sh -c "$check hold 3 $dir/stop.grandchild; echo done" > "$dir/log" 2>&1 &
pid=$!
wait_for 'PASS .* holding' 2
kill_and_check "grandchildren" "$dir/stop.grandchild"
echo "PASS: no worker outlives a SIGKILLed troupe-run by 2 s"
