#!/usr/bin/env bash
# A failing rank ends the job: its exit code becomes troupe-run's, the other
# ranks are terminated (killed if they ignore SIGTERM), all in bounded time.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
marker="sleep 60.$$"

start=$SECONDS
rc=0
timeout 30 "$run" -np 3 sh -c \
  "if [ \$TROUPE_RANK = 1 ]; then sleep 0.2; exit 7; fi; exec $marker" \
  >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" = 7 ] || fail "exit code $rc, want 7"
(( SECONDS - start < 10 )) || fail "took $((SECONDS - start)) s"
grep -qx 'troupe-run: rank 1 exited with status 7' "$dir/err" \
  || fail "stderr: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" = 1 ] || fail "extra stderr: $(cat "$dir/err")"
! pgrep -f "$marker" >/dev/null || fail "workers left running"

# Ranks that ignore SIGTERM are killed after the grace period.
marker="sleep 61.$$"
start=$SECONDS
rc=0
timeout 30 "$run" -np 2 sh -c \
  "if [ \$TROUPE_RANK = 0 ]; then sleep 0.2; exit 3; fi; trap '' TERM; $marker" \
  >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" = 3 ] || fail "exit code $rc, want 3"
elapsed=$((SECONDS - start))
(( elapsed >= 2 && elapsed < 10 )) || fail "grace took $elapsed s"
! pgrep -f "$marker" >/dev/null || fail "stubborn worker left running"

# The first failure decides the code, not the ranks stopped because of it.
rc=0
timeout 30 "$run" -np 2 sh -c \
  'if [ $TROUPE_RANK = 0 ]; then exit 5; fi; exec sleep 60' \
  >/dev/null 2>&1 || rc=$?
[ "$rc" = 5 ] || fail "exit code $rc, want 5"

# A command that does not exist.
rc=0
timeout 30 "$run" -np 2 /nonexistent/troupe-cmd >"$dir/out" 2>"$dir/err" \
  || rc=$?
[ "$rc" = 127 ] || fail "missing command: exit code $rc"
grep -q "cannot start '/nonexistent/troupe-cmd'" "$dir/err" \
  || fail "stderr: $(cat "$dir/err")"
echo PASS
