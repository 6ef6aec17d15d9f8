#!/usr/bin/env bash
# shm_kill.sh TROUPE_RUN CHECK kill|fds-held NP VICTIM MAX_SECONDS MAX_JOB_SECONDS [HOSTS]
# Gloo's shared-memory allreduce loses a rank: VICTIM SIGKILLs itself while
# every rank loops over 16 MiB allreduces through the host's segment
# (collective_check shm-kill), on one host or on HOSTS (troupe-run -H);
# with fds-held it leaves a child holding its sockets, so that no
# connection closes: on its host the segment's check of its members' pids
# finds the loss (50 ms, then the negotiator's 300 ms wait for a peer-loss
# message), on other hosts the heartbeat timeout.
# Every survivor's pending allreduce must fail within MAX_SECONDS (far below
# the 30 s Gloo timeout given) with an error naming whom it lost (see
# below), and its shutdown() return;
# troupe-run must exit non-zero within MAX_JOB_SECONDS, and afterwards no
# process of the job is left and neither the segments the ranks mapped nor
# any other segment a rank of the job created (/dev/shm/troupe-data-<its
# pid>-*, a control channel /dev/shm/troupe-ctl-<its pid>-*)
# is in /dev/shm.
set -u
run=$1 check=$2 how=$3 np=$4 victim=$5 max=$6 max_job=$7 hosts=${8:-}
stamp=$(mktemp)
out=$(mktemp)
trap 'rm -f "$stamp" "$out"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

extra=()
[ "$how" = fds-held ] && extra=(fds-held)
start=$(date +%s)
timeout 90 "$run" --timeout 60 -np "$np" ${hosts:+-H "$hosts"} --gloo-timeout-seconds 30 \
  "$check" shm-kill "$victim" "$stamp" "${extra[@]}" >"$out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
cat "$out"
echo "job ended after ${took} s with status $rc"
[ "$took" -le "$max_job" ] || fail "the job took more than $max_job s to end"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "troupe-run exited $rc; want the lost job's non-zero status"

# Every rank, the victim included, mapped a segment before the kill.
segments=$(grep -o "<stdout>:rank [0-9]*: pid [0-9]* segment /troupe-[^ ]*" "$out")
[ "$(echo "$segments" | grep -c .)" -eq "$np" ] || fail "not every rank mapped a segment: $segments"
grep -q "<stdout>:rank $victim: pid [0-9]* segment /troupe-" "$out" || fail "the victim held no segment"

survivors=$((np - 1))
failed=$(grep -o "<stdout>:rank [0-9]*: FAILED-AFTER [0-9.]* s, [0-9]* allreduces done ([a-z ]*): .\+" "$out")
[ "$(echo "$failed" | grep -c .)" -eq "$survivors" ] ||
  fail "$(echo "$failed" | grep -c .) of $survivors survivors saw their allreduce fail"
slow=$(echo "$failed" | awk -v max="$max" '$4 > max' | wc -l)
[ "$slow" -eq 0 ] || fail "a survivor's allreduce failed more than $max s after the kill"
# The error names whom it was lost with: the victim's rank (the control
# plane's loss) or pid (the segment's own check of its members' processes),
# or, on another host with fds-held, possibly the survivor whose shutdown
# ended the cross-host step first.
victim_pid=$(grep -o "<stdout>:rank $victim: pid [0-9]*" "$out" | awk '{print $4}')
named="rank $victim "
[ "$how" = fds-held ] && named="rank [0-9]* "
unclear=$(echo "$failed" | grep -v -e "): .*$named" -e "): .*(pid $victim_pid)")
[ -z "$unclear" ] || fail "a survivor's error does not name whom it lost: $unclear"
shut=$(grep -c "<stdout>:rank [0-9]*: SHUT-DOWN after" "$out")
[ "$shut" -eq "$survivors" ] || fail "$shut of $survivors survivors' shutdown() returned"

pids=$(echo "$segments" | awk '{print $4}')
for pid in $pids; do
  ! kill -0 "$pid" 2>/dev/null || fail "rank process $pid outlived the job"
done
for name in $(echo "$segments" | awk '{print $6}' | sort -u); do
  [ ! -e "/dev/shm$name" ] || fail "segment $name left in /dev/shm"
done
for pid in $pids; do
  left=$(ls /dev/shm | grep -E "^troupe-(data|ctl)-$pid-")
  [ -z "$left" ] || fail "segment $left of rank process $pid left in /dev/shm"
done
echo "PASS: $survivors survivors failed within $max s, job ended in ${took} s, no segment left"
