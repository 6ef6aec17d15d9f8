#!/usr/bin/env bash
# Every rank sees its identity under Troupe's, Horovod's and torch's names,
# and a successful job prints nothing but the tagged worker output.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

timeout 30 "$run" -np 3 sh -c 'echo $TROUPE_RANK $HOROVOD_SIZE $LOCAL_RANK' \
  >"$dir/out" 2>"$dir/err" || fail "exit code $?"
expected=$'[0]<stdout>:0 3 0\n[1]<stdout>:1 3 1\n[2]<stdout>:2 3 2'
[ "$(sort "$dir/out")" = "$expected" ] || fail "identity lines: $(cat "$dir/out")"
[ ! -s "$dir/err" ] || fail "unexpected stderr: $(cat "$dir/err")"

# Two "hosts" that are both this machine: local and cross ranks follow
# Horovod's host-by-host assignment.
fields='$TROUPE_RANK $TROUPE_LOCAL_RANK $TROUPE_LOCAL_SIZE $TROUPE_CROSS_RANK'
fields+=' $TROUPE_CROSS_SIZE $GROUP_RANK $TROUPE_HOSTNAME $HOROVOD_HOSTNAME'
timeout 30 "$run" -np 4 -H localhost:2,127.0.0.1:2 sh -c "echo $fields" \
  >"$dir/out" || fail "two-host job failed"
expected=$'[0]<stdout>:0 0 2 0 2 0 localhost localhost
[1]<stdout>:1 1 2 0 2 0 localhost localhost
[2]<stdout>:2 0 2 1 2 1 127.0.0.1 127.0.0.1
[3]<stdout>:3 1 2 1 2 1 127.0.0.1 127.0.0.1'
[ "$(sort "$dir/out")" = "$expected" ] || fail "cross ranks: $(cat "$dir/out")"

# One job id and one store for all ranks; the store is reachable.
timeout 30 "$run" -np 2 sh -c \
  'echo $TROUPE_JOB_ID $TROUPE_STORE_ADDR $TROUPE_STORE_PORT $WORLD_SIZE $LOCAL_WORLD_SIZE $PYTHONUNBUFFERED' \
  >"$dir/out" || fail "job id run failed"
[ "$(cut -d: -f2- "$dir/out" | sort -u | wc -l)" = 1 ] \
  || fail "ranks disagree: $(cat "$dir/out")"
read -r job_id addr port world local_world unbuffered \
  < <(head -n1 "$dir/out" | cut -d: -f2-)
[[ $job_id =~ ^[0-9a-f]{16}$ ]] || fail "job id '$job_id'"
[ "$addr" = 127.0.0.1 ] || fail "store addr '$addr'"
[[ $port =~ ^[0-9]+$ ]] || fail "store port '$port'"
[ "$world $local_world $unbuffered" = "2 2 1" ] || fail "torch vars"
timeout 30 "$run" -np 1 bash -c 'exec 3<>/dev/tcp/$TROUPE_STORE_ADDR/$TROUPE_STORE_PORT' \
  || fail "store not reachable from a worker"

# Two jobs get different ids.
a=$(timeout 30 "$run" -np 1 sh -c 'echo $TROUPE_JOB_ID')
b=$(timeout 30 "$run" -np 1 sh -c 'echo $TROUPE_JOB_ID')
[ "$a" != "$b" ] || fail "job ids repeat: $a"
echo PASS
