#!/usr/bin/env bash
# SIGTERM and SIGINT sent to troupe-run reach every worker; troupe-run then
# exits with 128 + the signal number.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
# Job control: background jobs get their own process group and keep SIGINT
# (a non-interactive shell would start them with SIGINT ignored).
set -m

# Starts troupe-run in the background and waits for both ranks to run.
start_job() {
  local marker=$1
  timeout 30 "$run" -np 2 sh -c "echo ready; exec $marker" \
    >"$dir/out" 2>"$dir/err" &
  pid=$!
  for _ in $(seq 100); do
    [ "$(grep -c ready "$dir/out" || true)" = 2 ] && return 0
    sleep 0.1
  done
  fail "workers did not start"
}

for sig in TERM INT; do
  marker="sleep 62.$$"
  start_job "$marker"
  start=$SECONDS
  # timeout(1) runs troupe-run as its child; signal troupe-run itself.
  troupe=$(pgrep -P "$pid" -x troupe-run)
  kill -"$sig" "$troupe"
  rc=0
  wait "$pid" || rc=$?
  pid=
  want=$((128 + $(kill -l "$sig")))
  [ "$rc" = "$want" ] || fail "SIG$sig: exit code $rc, want $want"
  (( SECONDS - start < 10 )) || fail "SIG$sig: took $((SECONDS - start)) s"
  grep -qx "troupe-run: received SIG$sig, stopping workers" "$dir/err" \
    || fail "stderr: $(cat "$dir/err")"
  ! pgrep -f "$marker" >/dev/null || fail "SIG$sig: workers left running"
done
echo PASS
