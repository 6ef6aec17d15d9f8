#!/bin/sh
# run_fuzzer.sh FUZZER CORPUS WORK SECONDS
# Replays every input of the committed CORPUS (seeds and the regression
# inputs of crashes found before), then fuzzes for SECONDS. New inputs and
# any crash go to WORK, never into the source tree; a crash, leak, timeout
# (10 s per input) or memory blow-up (2 GiB) fails the run. libFuzzer's own
# exit status for a crash is 77, which ctest takes for "skipped": 1 instead.
set -eu
fuzzer=$1 corpus=$2 work=$3 seconds=$4
mkdir -p "$work"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 \
  -artifact_prefix="$work/" -print_final_stats=1 "$work" "$corpus"
