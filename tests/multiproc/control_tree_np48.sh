#!/usr/bin/env bash
# control_tree_np48.sh TROUPE_RUN CHECK
# 48 real ranks on this host, TLS control plane, control tree of fanout 3
# (three levels of inner nodes): the control connections are that tree (at
# most 4 per rank, where a mesh is 1,128 TLS connections), and 100 training
# steps are checked exactly on every rank with the cache on and off; inner
# nodes over 3 to 16 ranks send their subtree's hits and requests up as
# one.
set -u
run=$1 check=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { grep -v '\[info\]' "$out" | tail -40; echo "FAIL: $*"; exit 1; }
for cap in 1024 0; do
  timeout 280 "$run" --timeout 250 --start-timeout 120 -np 48 --control-fanout 3 \
    --cache-capacity "$cap" --log-level info "$check" cache 100 >"$out" 2>&1 \
    || fail "48 ranks, cache $cap"
  [ "$(grep -c 'PASS 100 cached steps' "$out")" -eq 48 ] || fail "not every rank passed (cache $cap)"
  grep -q "control tree of fanout 3 over 48 ranks (1 host(s)) in place" "$out" \
    || fail "the tree was not put in place (cache $cap)"
  # No rank waited for its place (every one deep in the tree is reachable).
  ! grep -q "was not placed in the control tree" "$out" || fail "a rank was not placed (cache $cap)"
  [ "$(grep -c 'control connection(s) (the control tree of fanout 3)' "$out")" -eq 48 ] \
    || fail "not every rank holds the tree of control connections (cache $cap)"
  ! grep -qE "rank [0-9]+: ([5-9]|[1-9][0-9]+) control connection" "$out" \
    || fail "a rank holds more than 4 control connections (cache $cap)"
  # Set rank 1 leads [1, 17): its children lead subtrees of their own.
  grep -q "set rank 1 sent the requests of set ranks \[1, 17) up as one" "$out" \
    || fail "the node over [1, 17) never merged requests (cache $cap)"
  if [ "$cap" != 0 ]; then
    grep -q "set rank 1 sent the cache hits of set ranks \[1, 17) up as one" "$out" \
      || fail "the node over [1, 17) never aggregated hits"
  fi
  echo "PASS: 48 ranks, cache $cap ($(grep -c 'retrying in' "$out") connection retries)"
done
