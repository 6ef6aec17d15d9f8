#!/usr/bin/env bash
# tune_reset_elastic.sh TROUPE_RUN CHECK
# tune_reset_check elastic under troupe-run's elastic mode and autotuning,
# on loopback hosts of a file the discovery script prints: epoch 0 runs on
# 127.0.0.2 and .3, whose rank 0 sets every setting; host .4 is added (a
# newcomer, which never saw the list that named the settings, learns them
# from its first epoch's lists); then .2 and .3 are replaced by .5 (another
# newcomer), so only newcomers are left. Each epoch's CSV must hold one row,
# the application's settings: in the last one they are in force only if the
# first newcomer recorded them and restored them at the reset.
set -u
run=$1 check=$2
dir=$(mktemp -d)
launcher=
cleanup() {
  [ -n "$launcher" ] && kill "$launcher" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  cat "$dir/out.log"
  echo "FAIL: $*"
  exit 1
}
set_hosts() {
  printf '%s:1\n' "$@" > "$dir/hosts.new"
  mv "$dir/hosts.new" "$dir/hosts"
}
set_hosts 127.0.0.2 127.0.0.3
timeout 120 "$run" --timeout 100 -np 2 --min-np 1 \
  --host-discovery-script "cat $dir/hosts" \
  --autotune --autotune-warmup-samples 1 --autotune-steps-per-sample 2 \
  --autotune-log-file "$dir/tune.csv" "$check" elastic "$dir" > "$dir/out.log" 2>&1 &
launcher=$!

# The last epoch above $2 (default -1) the workers announced at size $1,
# once one has (bounded).
epoch_at_size() {
  local e
  for _ in $(seq 300); do
    e=$(sed -n "s/.*<stdout>:rank [0-9]*: epoch \([0-9]*\) size $1\$/\1/p" "$dir/out.log" |
        tail -n 1)
    [ -n "$e" ] && [ "$e" -gt "${2:--1}" ] && { echo "$e"; return 0; }
    sleep 0.1
  done
  return 1
}
# The CSV of epoch $1 (tune.csv for epoch 0).
csv_of() {
  if [ "$1" = 0 ]; then echo "$dir/tune.csv"; else echo "$dir/tune.epoch$1.csv"; fi
}
# Waits (bounded) until the tuner of epoch $1 wrote a row.
wait_for_row() {
  local log
  log=$(csv_of "$1")
  for _ in $(seq 300); do
    [ "$(wc -l 2>/dev/null < "$log" || echo 0)" -ge 2 ] && return 0
    sleep 0.1
  done
  fail "no row in $(basename "$log") within 30 s"
}

first=$(epoch_at_size 2) || fail "the job never ran at size 2"
wait_for_row "$first"
set_hosts 127.0.0.2 127.0.0.3 127.0.0.4
grown=$(epoch_at_size 3) || fail "the newcomer on 127.0.0.4 never joined"
wait_for_row "$grown"
set_hosts 127.0.0.4 127.0.0.5
last=$(epoch_at_size 2 "$grown") \
  || fail "the newcomers never ran at size 2 without 127.0.0.2 and .3"
wait_for_row "$last"
touch "$dir/stop"
wait "$launcher"
rc=$?
launcher=
[ "$rc" = 0 ] || fail "troupe-run exited $rc"

# 127.0.0.2 and .3 removed, the newcomers on .4 and .5 passed.
grep -q "<stdout>:rank [0-9]*: FAIL" "$dir/out.log" && fail "a worker failed"
removed=$(grep -c "<stdout>:rank [0-9]*: removed" "$dir/out.log")
passed=$(grep -c "<stdout>:rank [0-9]*: PASS elastic" "$dir/out.log")
[ "$removed" = 2 ] && [ "$passed" = 4 ] \
  || fail "$removed workers removed (want 2), $passed passed (want 4)"
want="0,0,0,1,0,0,0,4"
for e in "$first" "$grown" "$last"; do
  log=$(csv_of "$e")
  rows=$(tail -n +2 "$log")
  [ "$rows" = "$want" ] \
    || fail "$(basename "$log") holds rows other than the application's settings: $rows"
done
echo "PASS: epochs $first, $grown and $last ran with the application's settings"
