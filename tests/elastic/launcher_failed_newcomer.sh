#!/usr/bin/env bash
# Elastic mode: discovery adds two hosts at once; the worker started for one
# (127.0.0.5) fails before it publishes its endpoint (exit 255, as an ssh
# that cannot connect). The healthy newcomer on the other (127.0.0.4) and
# the two veterans must not wait for it: they give the planned epoch up,
# arrive at the next one and run there at size 3. Only 127.0.0.5 is
# blacklisted, and the job exits 0.
#
#   launcher_failed_newcomer.sh TROUPE_RUN PYTHONPATH [START_TIMEOUT RESET_TIMEOUT]
#
# Whatever the timeouts, the members of the epoch that cannot start give
# it up as soon as troupe-run opens the next reset barrier (they see
# <job>/barrier/<E> within about 1 s), not when their start timeout passes.
# The timeouts (default 5 and 20) choose what else is checked: with a start
# timeout below the reset timeout, that a newcomer whose first epoch cannot
# start is not ended by init(); with one above it (40 and 20), also that
# the job runs at size 3 within 15 s of the hosts being added, long before
# the start timeout, which is past the barrier's deadline.
set -euo pipefail
run=$1
export PYTHONPATH=$2 PYTHONDONTWRITEBYTECODE=1
start_timeout=${3:-5}
reset_timeout=${4:-20}
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '127.0.0.2:1\n127.0.0.3:1\n' >"$dir/hosts"

# Each worker: init(), reset() whenever troupe-run announces a change of
# hosts, until it runs at size 3; then it waits (bounded) for the other two
# to get there before it exits 0, so that none leaves an epoch still
# starting.
cat >"$dir/worker.py" <<'EOF'
import os, sys, time
from troupe import _core
dir, host = sys.argv[1], os.environ['HOROVOD_HOSTNAME']
def say(*words):
    print(host, *words, flush=True)
code, message = _core.init()
if code:
    say('init failed:', message)
    sys.exit(1)
say('started at epoch', _core.epoch(), 'size', _core.size())
deadline = time.time() + 45
code = 0
while code or _core.size() != 3:
    if time.time() > deadline:
        say('never at size 3')
        sys.exit(1)
    if code or _core.hosts_updated():
        # A failed reset() is tried again, as hvd.elastic.run does.
        code, message = _core.reset()
        say('reset to epoch', _core.epoch(), 'size', _core.size(), 'status', code, message)
    time.sleep(0.05)
say('at size 3, epoch', _core.epoch())
open(os.path.join(dir, 'at3.' + host), 'w').close()
while len([f for f in os.listdir(dir) if f.startswith('at3.')]) < 3:
    if time.time() > deadline:
        say('the others never got to size 3')
        sys.exit(1)
    time.sleep(0.05)
EOF

# The worker for 127.0.0.5 exits 255 before it runs anything.
hook='[ "$TROUPE_SPAWN_HOST" != 127.0.0.5 ] || exit 255; exec'
rc=0
timeout 80 "$run" -np 2 --min-np 2 --host-discovery-script "cat $dir/hosts" \
  --start-timeout "$start_timeout" --reset-timeout "$reset_timeout" \
  --spawn-command "$hook" /usr/bin/python3 "$dir/worker.py" "$dir" \
  >"$dir/out" 2>"$dir/err" &
launcher=$!
# Once both veterans run at size 2, add the two hosts.
for _ in $(seq 300); do
  [ "$(grep -c 'started at epoch 0 size 2' "$dir/out" || true)" = 2 ] && break
  sleep 0.1
done
[ "$(grep -c 'started at epoch 0 size 2' "$dir/out" || true)" = 2 ] \
  || fail "the first two workers did not start: $(cat "$dir/out" "$dir/err")"
added=$SECONDS
printf '127.0.0.2:1\n127.0.0.3:1\n127.0.0.4:1\n127.0.0.5:1\n' >"$dir/hosts.new"
mv "$dir/hosts.new" "$dir/hosts"
wait "$launcher" || rc=$?
took=$((SECONDS - added))
show="stdout: $(cat "$dir/out")
stderr: $(tail -40 "$dir/err")"
[ "$rc" = 0 ] || fail "exit code $rc, want 0 ($took s after the hosts were added); $show"
grep -q '127.0.0.5 is blacklisted' "$dir/err" || fail "127.0.0.5 not blacklisted; $show"
! grep -q '127.0.0.4 is blacklisted' "$dir/err" || fail "the healthy newcomer's host was blacklisted; $show"
for host in 127.0.0.2 127.0.0.3 127.0.0.4; do
  grep -q "<stdout>:$host at size 3" "$dir/out" || fail "$host never ran at size 3; $show"
done
# Without waiting out a start timeout: the epoch with 127.0.0.5 is given up
# once troupe-run opens the next barrier (discovery polls every second).
if (( start_timeout >= reset_timeout )); then
  (( took < 15 )) || fail "took $took s after the hosts were added; $show"
fi
echo "PASS ($took s after the hosts were added)"
