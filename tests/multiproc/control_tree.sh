#!/usr/bin/env bash
# control_tree.sh TROUPE_RUN CHECK
# 7 ranks in a control tree of fanout 2 (inner nodes 1 and 4, over set
# ranks [1, 4) and [4, 7)), with the control channel and without it (then
# the inner nodes pass every response list on to their children): cached
# training steps checked exactly while the cache churns and with the cache
# off (full requests merged at the inner nodes), every user error
# on every rank, join, and a stall warning naming the withheld rank and no
# other (a cached tensor: the other ranks' hits wait at inner nodes; and
# with the cache off, their full requests). The tree must be in place and
# both inner nodes must have sent their subtree's hits, and with the cache
# off their requests, up as one. Then fanout 1 (a chain: every rank but the
# last an inner node) under dynamic process sets (each set its own tree),
# 50 in-place resets (the trees rebuilt each time) and join. Then dynamic
# sets across the branches of 15 ranks' tree of control connections (no
# rank holds more than 3). Last, a fanout that differs between the
# coordinator's rank and the others (the control connections a full mesh).
set -u
run=$1 check=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }
# expect_count N PATTERN WHY: exactly N lines of the job's output match.
expect_count() { [ "$(grep -c -- "$2" "$out")" -eq "$1" ] || fail "$3"; }
for ctl in 1 0; do
  common=(--timeout 100 -np 7 --control-fanout 2 --shm-control "$ctl")
  timeout 120 "$run" "${common[@]}" --log-level info "$check" cache 1000 >"$out" 2>&1 \
    || fail "cache steps (channel $ctl)"
  expect_count 7 'PASS 1000 cached steps' "not every rank passed the steps"
  grep -q "control tree of fanout 2 over 7 ranks (1 host(s)) in place; the coordinator sends lists to 3 of them" \
    "$out" || fail "the tree was not put in place (channel $ctl)"
  for node in "1, 4" "4, 7"; do
    grep -q "cache hits of set ranks \[$node) up as one" "$out" \
      || fail "the node over [$node) never aggregated (channel $ctl)"
  done
  # A cache of 8 entries for tensors that churn: misses and evictions flush
  # what the inner nodes hold.
  timeout 120 "$run" "${common[@]}" --cache-capacity 8 "$check" cache 1000 >"$out" 2>&1 \
    || fail "cache steps, capacity 8 (channel $ctl)"
  expect_count 7 'PASS 1000 cached steps' "not every rank passed the steps"
  # The cache off: every round is full requests, merged at the inner nodes
  # (an allgather's differ, and go up as they came).
  timeout 120 "$run" "${common[@]}" --log-level info --cache-capacity 0 "$check" cache 300 \
    >"$out" 2>&1 || fail "steps with the cache off (channel $ctl)"
  expect_count 7 'PASS 300 cached steps' "not every rank passed the steps"
  for node in "1, 4" "4, 7"; do
    grep -q "requests of set ranks \[$node) up as one" "$out" \
      || fail "the node over [$node) never merged requests (channel $ctl)"
  done
  for mode in errors join; do
    timeout 120 "$run" "${common[@]}" "$check" "$mode" >"$out" 2>&1 || fail "$mode (channel $ctl)"
  done
  # The stall with the cache on (a withheld hit) and off (a withheld full
  # request: ranks 4 and 5's requests wait for it at their node).
  for cap in 1024 0; do
    timeout 120 "$run" "${common[@]}" --log-level info --cache-capacity "$cap" \
      --stall-check-time-seconds 1 --stall-shutdown-time-seconds 3 "$check" stall >"$out" 2>&1 \
      || fail "stall (channel $ctl, cache $cap)"
    grep -q "6: \[stall.withheld\]" "$out" \
      || fail "no stall warning naming rank 6 (channel $ctl, cache $cap)"
    # What ranks 4 and 5 sent waits at their node a quarter of the check
    # time at most: no warning may name them.
    if grep -E "<stderr>:[0-9]+: \[stall.withheld\]" "$out" | grep -vq "<stderr>:6: "; then
      fail "a stall warning named a rank that had submitted (channel $ctl, cache $cap)"
    fi
    # ...and their node says why it sent them up without rank 6.
    grep -q "set rank 4 held 'stall.withheld' for the control tree's hold (250 ms) but set ranks \[6, 7) had not asked for it" \
      "$out" || fail "the node over [4, 7) did not say it held the tensor without rank 6 (channel $ctl, cache $cap)"
    expect_count 7 'PASS stalled tensor failed' \
    "not every rank passed the stall (cache $cap)"
  done
  echo "PASS: control tree, channel $ctl"
done
chain=(--timeout 100 --control-fanout 1 --dynamic-process-sets 1)
timeout 150 "$run" "${chain[@]}" -np 4 "$check" process-sets >"$out" 2>&1 || fail "process sets in a chain"
timeout 150 "$run" "${chain[@]}" -np 4 "$check" reset 50 >"$out" 2>&1 || fail "resets in a chain"
expect_count 4 'PASS 50 in-place resets' "not every rank passed the resets"
timeout 150 "$run" "${chain[@]}" -np 5 "$check" join >"$out" 2>&1 || fail "join in a chain"
echo "PASS: process sets, resets and join in a chain"
# Sets across the branches of the control connections (15 ranks, fanout 2,
# three levels), their coordinators below the root, lists over CAF and
# through the channel: each member connects to its set's coordinator and
# parent itself. Routed along the tree instead, the set {2, 13, 14} never
# ran (rank 1 had no route to 13) and the job hung.
for ctl in 0 1; do
  timeout 120 "$run" --timeout 100 -np 15 --control-fanout 2 --dynamic-process-sets 1 \
    --shm-control "$ctl" --log-level info "$check" crossing-sets >"$out" 2>&1 \
    || fail "sets across the tree (channel $ctl)"
  expect_count 15 'PASS crossing process sets' \
    "not every rank passed the sets across the tree (channel $ctl)"
  # The root holds its 2 children, no rank more than 3 (a mesh: 14 each).
  grep -q "troupe rank 0: 2 control connection(s) (the control tree of fanout 2)" "$out" \
    || fail "rank 0 does not hold exactly its two children (channel $ctl)"
  expect_count 15 'control connection(s) (the control tree of fanout 2)' \
    "not every rank is in the tree of connections (channel $ctl)"
  ! grep -qE "rank [0-9]+: ([4-9]|[1-9][0-9]+) control connection" "$out" \
    || fail "a rank holds more than 3 tree connections (channel $ctl)"
done
echo "PASS: process sets across the tree's branches"
# A fanout that differs across ranks (bad input) never hangs: a coordinator
# that places nobody (fanout 0 on rank 0) leaves the others waiting for a
# place 5 s, then they warn and send as in a star; a coordinator that
# places everyone while the others expect a star (fanout 0 on them) gets
# their first lists straight, and its inner nodes' rounds end at its answers.
for zero in '= 0' '!= 0'; do
  timeout 120 "$run" --timeout 100 -np 5 --control-fanout 2 --log-level info sh -c \
    "[ \"\$TROUPE_RANK\" $zero ] && export TROUPE_CONTROL_FANOUT=0; exec \"$check\" cache 30" \
    >"$out" 2>&1 || fail "fanout 0 where TROUPE_RANK $zero"
  expect_count 5 'PASS 30 cached steps' \
    "not every rank passed the steps with fanout 0 where TROUPE_RANK $zero"
  if [ "$zero" = '= 0' ]; then
    expect_count 4 'was not placed in the control tree within 5 s' \
    "ranks 1-4 did not each warn that they were not placed"
  fi
  # ...and the control connections are the full mesh, said on rank 0 too.
  grep -q "troupe rank 0: TROUPE_CONTROL_FANOUT is .* every rank connects to every other" "$out" \
    || fail "rank 0 did not warn of the mesh (fanout 0 where TROUPE_RANK $zero)"
  expect_count 5 'control connection(s) (a full mesh)' \
    "not every rank holds the full mesh (fanout 0 where TROUPE_RANK $zero)"
done
echo "PASS: a fanout that differs across ranks"
