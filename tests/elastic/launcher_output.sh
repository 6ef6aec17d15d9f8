#!/usr/bin/env bash
# Worker output is forwarded line by line with horovodrun's rank tags,
# stdout to stdout and stderr to stderr, partial last lines included.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

timeout 30 "$run" -np 2 sh -c 'echo out; echo err >&2; printf "no newline"' \
  >"$dir/out" 2>"$dir/err" || fail "exit code $?"
expected=$'[0]<stdout>:no newline\n[0]<stdout>:out\n[1]<stdout>:no newline\n[1]<stdout>:out'
[ "$(sort "$dir/out")" = "$expected" ] || fail "stdout: $(cat "$dir/out")"
expected=$'[0]<stderr>:err\n[1]<stderr>:err'
[ "$(sort "$dir/err")" = "$expected" ] || fail "stderr: $(cat "$dir/err")"

# Heavy concurrent output never splits or loses a line.
timeout 30 "$run" -np 3 seq 1 20000 >"$dir/out" || fail "seq job failed"
[ "$(wc -l <"$dir/out")" = 60000 ] || fail "line count $(wc -l <"$dir/out")"
! grep -Evq '^\[[012]\]<stdout>:[0-9]+$' "$dir/out" || fail "mangled lines"
for r in 0 1 2; do
  [ "$(grep -c "^\[$r\]" "$dir/out")" = 20000 ] || fail "rank $r lines"
done

# Output written just before a failing exit still arrives, before the report.
rc=0
timeout 30 "$run" -np 1 sh -c 'echo last words >&2; exit 4' \
  2>"$dir/err" || rc=$?
[ "$rc" = 4 ] || fail "exit code $rc"
expected=$'[0]<stderr>:last words\ntroupe-run: rank 0 exited with status 4'
[ "$(cat "$dir/err")" = "$expected" ] || fail "stderr: $(cat "$dir/err")"
echo PASS
