#!/usr/bin/env bash
# shm_orphans.sh TROUPE_RUN CHECK [--mpi]
# Ranks SIGKILLed right after creating shared segments, before any peer
# opened them (so before the runtime unlinks their names): troupe-run
# removes each name the ranks it started on this host left in /dev/shm, and
# says so (that it leaves other processes' names alone is unit-tested:
# segment_names.*). With --mpi, mpirun starts the ranks and troupe-run,
# which never learns their pids, removes the names after mpirun's exit.
set -u
run=$1 check=$2 mode=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { cat "$dir/out"; echo "FAIL: $*"; exit 1; }

# shellcheck disable=SC2086  # $mode is one word or none
timeout 90 "$run" $mode --timeout 60 -np 2 "$check" shm-orphans > "$dir/out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "troupe-run exited $rc, want the killed rank's failure"
names=$(sed -n 's|.*rank [0-9]*: ORPHAN \(/troupe-[a-z]*-[0-9]*-[0-9]*-[0-9a-f]*\)$|\1|p' "$dir/out")
count=$(echo "$names" | grep -c troupe)
(( count >= 2 )) || fail "the ranks printed no segments (found $count)"
if [ "$mode" = --mpi ]; then who='a rank'; else who='rank [01]'; fi
for n in $names; do
  [ ! -e "/dev/shm$n" ] || fail "$n is still in /dev/shm"
  grep -q "troupe-run: removed shared-memory segment $n that $who (pid [0-9]*) left behind" \
    "$dir/out" || fail "troupe-run did not say it removed $n"
done
echo "PASS: $count segment names of killed ranks removed"
