#!/usr/bin/env bash
# autotune.sh TROUPE_RUN CHECK
# 1. A mixed workload (allreduces of four dtypes whose shapes change,
#    allgathers, broadcasts from moving roots, response cache churn) on 3
#    ranks with autotuning: every result is checked exactly while the
#    settings change; the CSV has every scored setting, the finalists
#    scored again and the best of them last;
#    fusion threshold, cycle time, cache and chunk all move; the coordinator's
#    timeline has the samples.
# 2. A fusion threshold (Horovod's variable) and a CPU allreduce chunk
#    given explicitly are never tuned; the rest still is.
# 3. Two process sets tune independently, each its own CSV.
# 4. Resets with autotuning on (Horovod's autotuner crashed with elastic):
#    each epoch's global set starts a new tuner with its own CSV.
# 5. The application sets every setting at its first step (troupe::tune):
#    the tuner stops at once, its one row the application's settings.
set -u
run=$1 check=$2
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# 6 Bayesian settings + the cache flipped + the one chunk of the two (whole,
# 1 MiB) that the configured one (-1) does not come to on the set's backend
# = 8 scored rows, then the 3 best and the configured one scored again.
knobs=(--autotune --autotune-warmup-samples 1 --autotune-steps-per-sample 2
       --autotune-bayes-opt-max-samples 6)
csv_check() {
  /usr/bin/python3 "$here/autotune_csv_check.py" --finalists 4 "$@" || exit 1
}

timeout 150 "$run" --timeout 120 -np 3 "${knobs[@]}" --autotune-log-file "$dir/tune.csv" \
  --timeline-filename "$dir/trace.json" "$check" cache 3000 > "$dir/mixed.log" 2>&1 \
  || { cat "$dir/mixed.log"; echo "FAIL: mixed workload under autotuning"; exit 1; }
[ "$(grep -c PASS "$dir/mixed.log")" = 3 ] || { cat "$dir/mixed.log"; exit 1; }
csv_check "$dir/tune.csv" --rows 8 --explicit-chunks 1 \
  --varies tensor_fusion_threshold,cycle_time_ms,cache_enabled,fusion_chunk_bytes
grep -q '"AUTOTUNE_SAMPLE set 0 ' "$dir/trace.0.json" \
  || { echo "FAIL: no AUTOTUNE_SAMPLE on rank 0's timeline"; exit 1; }

HOROVOD_FUSION_THRESHOLD=65536 TROUPE_FUSION_CHUNK_BYTES=8192 timeout 150 "$run" \
  --timeout 120 -np 2 "${knobs[@]}" \
  --autotune-log-file "$dir/fixed.csv" "$check" cache 3000 > "$dir/fixed.log" 2>&1 \
  || { cat "$dir/fixed.log"; echo "FAIL: run with a fixed fusion threshold"; exit 1; }
csv_check "$dir/fixed.csv" --rows 7 --fixed tensor_fusion_threshold=0.0625,fusion_chunk_bytes=8192 \
  --varies cycle_time_ms

timeout 150 "$run" --timeout 120 -np 3 "${knobs[@]}" --autotune-log-file "$dir/sets.csv" \
  "$check" autotune-sets 600 > "$dir/sets.log" 2>&1 \
  || { cat "$dir/sets.log"; echo "FAIL: two tuned process sets"; exit 1; }
[ "$(grep -c PASS "$dir/sets.log")" = 3 ] || { cat "$dir/sets.log"; exit 1; }
csv_check "$dir/sets.set1.csv" --rows 8 --varies tensor_fusion_threshold
csv_check "$dir/sets.set2.csv" --rows 8 --varies tensor_fusion_threshold

timeout 150 "$run" --timeout 120 -np 2 --dynamic-process-sets 1 "${knobs[@]}" \
  --autotune-log-file "$dir/reset.csv" "$check" reset 30 > "$dir/reset.log" 2>&1 \
  || { cat "$dir/reset.log"; echo "FAIL: resets with autotuning"; exit 1; }
epochs=$(ls "$dir"/reset.epoch*.csv 2>/dev/null | wc -l)
(( epochs >= 30 )) || { ls "$dir"; echo "FAIL: $epochs epoch logs after 30 resets"; exit 1; }

timeout 150 "$run" --timeout 120 -np 2 "${knobs[@]}" --autotune-log-file "$dir/app.csv" \
  "$check" tune 200 > "$dir/app.log" 2>&1 \
  || { cat "$dir/app.log"; echo "FAIL: tune() under autotuning"; exit 1; }
# tuning_at(0) in cache_checks.cpp: cache 1024, cycle 0, fusion 0, chunk 4.
[ "$(tail -n +2 "$dir/app.csv")" = "0,0,0,1,0,0,0,4" ] \
  || { cat "$dir/app.csv"; echo "FAIL: the tuner did not keep the application's settings"; exit 1; }
echo PASS
