#!/usr/bin/env bash
# launcher_killed.sh TROUPE_RUN CHECK [--mpi]
# SIGKILL of troupe-run leaves no worker behind (they used to train on as
# orphans): within 2 s, direct children are gone by their parent-death
# signal, and ranks started through a shell (grandchildren) by losing
# troupe-run's store. With --mpi: ranks that mpirun started, by their
# watch of troupe-run's process.
set -u
marker=
run=$1 check=$2 mode=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
pid=
mpirun=
# (An empty marker would match every process: none is killed by it then.)
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; [ -n "$mpirun" ] && kill -KILL "$mpirun" 2>/dev/null; pkill -KILL -f "$dir/" 2>/dev/null; [ -n "$marker" ] && pkill -KILL -f "$marker" 2>/dev/null; rm -rf "$dir"' EXIT

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
  pgrep -af "$2"
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

if [ "$mode" = --mpi ]; then
  # Ranks whose only link to troupe-run is their own watch of its process:
  # each must hold a pidfd of troupe-run's process, and be gone within 2 s
  # of troupe-run's SIGKILL. mpirun is stopped first so that its
  # parent-death SIGTERM waits; the kernel may still wake it (SIGHUP and
  # SIGCONT to a stopped, orphaned process group), so the pidfd is checked
  # directly too. mpirun's command line holds the ranks' too: the marker
  # matches the ranks alone.
  marker="^$check hold 3 $dir/stop.mpi"
  "$run" --mpi -np 2 "$check" hold 3 "$dir/stop.mpi" > "$dir/log" 2>&1 &
  pid=$!
  wait_for 'PASS .* holding' 2
  mpirun=$(pgrep -P "$pid" mpirun) || fail "no mpirun under troupe-run"
  ranks=$(pgrep -f "$marker")
  [ "$(echo "$ranks" | wc -w)" -eq 2 ] || fail "found '$ranks' for the 2 ranks"
  for rank in $ranks; do
    watched=
    for fd in /proc/"$rank"/fd/*; do
      [ "$(readlink "$fd")" = "anon_inode:[pidfd]" ] &&
        grep -q "^Pid:[[:space:]]*$pid\$" "/proc/$rank/fdinfo/${fd##*/}" && watched=yes
    done
    [ -n "$watched" ] || fail "rank process $rank holds no pidfd of troupe-run ($pid)"
  done
  kill -STOP "$mpirun"
  kill_and_check "ranks under a stopped mpirun" "$marker"
  echo "PASS: no MPI rank outlives a SIGKILLed troupe-run by 2 s, mpirun stopped"
  exit 0
fi

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
