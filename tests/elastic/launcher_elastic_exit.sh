#!/usr/bin/env bash
# Elastic mode, workers that exit 0: they are done, not a reason to kill the
# others. A rank still at its own work (saving a checkpoint) past
# --reset-timeout after its peers exited 0 finishes, and the job exits 0.
# A failure still starts the reset barrier's deadline.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Three loopback "hosts", one slot each: a failure blacklists only its own.
hosts="printf '127.0.0.2:1\n127.0.0.3:1\n127.0.0.4:1\n'"

rc=0
timeout 30 "$run" -np 3 --host-discovery-script "$hosts" --reset-timeout 1 sh -c \
  'if [ $HOROVOD_RANK = 0 ]; then sleep 3; echo saved; fi' \
  >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" = 0 ] || fail "exit code $rc, want 0: $(cat "$dir/err")"
grep -qx '\[0\]<stdout>:saved' "$dir/out" || fail "rank 0 did not finish: $(cat "$dir/out")"
! grep -q 'blacklisted' "$dir/err" || fail "a host was blacklisted: $(cat "$dir/err")"
grep -q 'starts when a member arrives there' "$dir/err" || fail "stderr: $(cat "$dir/err")"

# Rank 1 done, rank 2 fails, rank 0 neither arrives nor exits: killed at the
# deadline the failure started; the job ends with the failure's code.
marker="sleep 60.$$"
start=$SECONDS
rc=0
timeout 30 "$run" -np 3 --host-discovery-script "$hosts" --reset-timeout 1 sh -c \
  "case \$HOROVOD_RANK in 0) exec $marker;; 2) sleep 0.5; exit 3;; esac" \
  >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" = 3 ] || fail "exit code $rc, want 3: $(cat "$dir/err")"
(( SECONDS - start < 10 )) || fail "took $((SECONDS - start)) s"
grep -q 'worker 0 .* did not arrive at the reset barrier within 1 s' "$dir/err" \
  || fail "stderr: $(cat "$dir/err")"
! pgrep -f "$marker" >/dev/null || fail "worker left running"
echo PASS
