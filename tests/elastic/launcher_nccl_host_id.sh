#!/usr/bin/env bash
# --nccl-host-id-per-rank (TROUPE_NCCL_HOSTID_PER_RANK) gives every rank its
# own NCCL_HOSTID, <job id>-<rank>; an NCCL_HOSTID the user set is kept.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
show='echo "$TROUPE_RANK $TROUPE_JOB_ID ${NCCL_HOSTID-unset}"'

# Each rank's line is "<rank> <job id> <host id>", tag removed.
check_per_rank() {
  local out=$1 n=0 rank job id
  while read -r rank job id; do
    [ "$id" = "$job-$rank" ] || fail "rank $rank: NCCL_HOSTID '$id', job $job"
    n=$((n + 1))
  done < <(cut -d: -f2- "$out")
  [ "$n" = 2 ] || fail "expected 2 ranks: $(cat "$out")"
  [ "$(cut -d' ' -f3 "$out" | sort -u | wc -l)" = 2 ] || fail "host ids repeat: $(cat "$out")"
}

env -u NCCL_HOSTID timeout 30 "$run" -np 2 --nccl-host-id-per-rank sh -c "$show" \
  >"$dir/out" 2>"$dir/err" || fail "flag run: exit code $?"
check_per_rank "$dir/out"
[ ! -s "$dir/err" ] || fail "unexpected stderr: $(cat "$dir/err")"

env -u NCCL_HOSTID TROUPE_NCCL_HOSTID_PER_RANK=1 timeout 30 "$run" -np 2 sh -c "$show" \
  >"$dir/out" || fail "variable run: exit code $?"
check_per_rank "$dir/out"

# Off by default: NCCL_HOSTID stays unset.
env -u NCCL_HOSTID timeout 30 "$run" -np 2 sh -c "$show" >"$dir/out" || fail "default run"
[ "$(cut -d' ' -f3 "$dir/out" | sort -u)" = unset ] || fail "default run: $(cat "$dir/out")"

# The user's own value wins, and troupe-run says so.
NCCL_HOSTID=mine timeout 30 "$run" -np 2 --nccl-host-id-per-rank sh -c "$show" \
  >"$dir/out" 2>"$dir/err" || fail "user value run"
[ "$(cut -d' ' -f3 "$dir/out" | sort -u)" = mine ] || fail "user value: $(cat "$dir/out")"
grep -q "NCCL_HOSTID is set" "$dir/err" || fail "no note on stderr: $(cat "$dir/err")"
echo PASS
