#!/usr/bin/env bash
# tune_reset.sh TROUPE_RUN CHECK MODE
# tune_reset_check MODE on 3 ranks under autotuning (see there): every
# rank that is to pass passes, and the CSV of each epoch's global set holds
# one row, the application's settings (the tuner stopped at once: nothing
# left to search). Without them kept over a reset, a later epoch's tuner
# searches again from the configured settings.
set -u
run=$1 check=$2 mode=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 90 "$run" --timeout 60 -np 3 --autotune --autotune-warmup-samples 1 \
  --autotune-steps-per-sample 2 --autotune-log-file "$dir/tune.csv" \
  "$check" "$mode" > "$dir/out.log" 2>&1
# The application's settings: cache 1024, cycle 0, fusion 0, chunk 4; in
# later_wins the chunk is 8 from a step of epoch 0 on (its tuner was gone by
# then: that CSV ends with 4).
want="0,0,0,1,0,0,0,4"
case $mode in
  explicit) want_passed=3 logs="tune.csv tune.epoch1.csv tune.epoch2.csv" ;;
  loss|setter_lost) want_passed=2 logs="tune.csv tune.epoch1.csv" ;;
  later_wins) want_passed=3 logs="tune.epoch1.csv tune.epoch2.csv" want="0,0,0,1,0,0,0,8" ;;
esac
passed=$(grep -c "<stdout>:rank [0-9]*: PASS $mode" "$dir/out.log")
if grep -q "<stdout>:rank [0-9]*: FAIL" "$dir/out.log" || [ "$passed" -ne "$want_passed" ]; then
  cat "$dir/out.log"
  echo "FAIL: $passed of $want_passed ranks passed"
  exit 1
fi
for log in $logs; do
  rows=$(tail -n +2 "$dir/$log" 2>/dev/null)
  if [ "$rows" != "$want" ]; then
    cat "$dir/out.log"
    echo "FAIL: $log holds rows other than the application's settings:"
    echo "$rows"
    exit 1
  fi
done
echo "PASS: $logs each hold the application's settings"
