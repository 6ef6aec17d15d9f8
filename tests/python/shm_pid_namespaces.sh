#!/usr/bin/env bash
# shm_pid_namespaces.sh TROUPE_RUN PYTHONPATH
# Ranks of one host in pid namespaces of their own that share /dev/shm, as
# containers run with --ipc=host --net=host: a pid in the host's segment
# names another process, or none, to a member of another namespace. Rank 1
# runs in a pid namespace of its own and rank 0 freezes for 200 ms five
# times during 8 MiB allreduces, which spend most of their time in the
# segment: rank 1 waits there long enough to check its peers' processes,
# and must not take rank 0 for exited.
set -u
run=$1
export PYTHONPATH=$2
unshare --pid --fork true 2>/dev/null || { echo "SKIP: unshare --pid needs root here"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/own_namespace.sh" <<'SH'
#!/bin/sh
[ "$TROUPE_RANK" = 1 ] && exec unshare --pid --fork "$@"
exec "$@"
SH
cat > "$dir/freeze.py" <<'PY'
import os
import subprocess
import torch
import troupe.torch as hvd
hvd.init()
if hvd.rank() == 0:
    me = os.getpid()
    freeze = 'sleep 0.2; kill -STOP %d; sleep 0.2; kill -CONT %d; ' % (me, me)
    subprocess.Popen(['sh', '-c', freeze * 5])
for i in range(400):
    assert hvd.allreduce(torch.ones(2 << 20), op=hvd.Sum, name='frozen').eq(2).all(), i
print('rank %d: PASS' % hvd.rank(), flush=True)
PY
chmod +x "$dir/own_namespace.sh"
TROUPE_LOG_LEVEL=info timeout 150 "$run" --timeout 120 -np 2 "$dir/own_namespace.sh" /usr/bin/python3 "$dir/freeze.py" \
  > "$dir/log" 2>&1
status=$?
grep -q "shared-memory allreduce on host" "$dir/log" \
  || { cat "$dir/log"; echo "FAIL: the ranks did not share a segment"; exit 1; }
[ "$status" = 0 ] && [ "$(grep -c 'PASS' "$dir/log")" = 2 ] \
  || { cat "$dir/log"; echo "FAIL: exit $status"; exit 1; }
echo PASS
