#!/usr/bin/env bash
# A rank killed by a signal is reported by name and ends the job with
# 128 + the signal number.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
marker="sleep 63.$$"

start=$SECONDS
rc=0
timeout 30 "$run" -np 3 sh -c \
  "if [ \$TROUPE_RANK = 2 ]; then sleep 0.2; kill -SEGV \$\$; fi; exec $marker" \
  >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" = 139 ] || fail "exit code $rc, want 139"
(( SECONDS - start < 10 )) || fail "took $((SECONDS - start)) s"
grep -qx 'troupe-run: rank 2 killed by signal SIGSEGV' "$dir/err" \
  || fail "stderr: $(cat "$dir/err")"
! pgrep -f "$marker" >/dev/null || fail "workers left running"
echo PASS
