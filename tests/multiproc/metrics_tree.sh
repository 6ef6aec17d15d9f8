#!/usr/bin/env bash
# metrics_tree.sh TROUPE_RUN CHECK
# 7 ranks in a control tree of fanout 2 run 300 checked allreduces of ten
# names one after another (290 cache hits) and hold. The inner nodes (set
# ranks 1 and 4, over [1, 4) and [4, 7)) must count the hits they sent up
# in troupe_control_tree_hits_total: together at least 290 hits or ranges,
# most of them aggregated for the whole subtree; the root and the leaves
# count none.
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
job_dir
base=$(free_base 8) || exit 1
launch "$run" "$dir" "$base" -np 7 --control-fanout 2 "$check" hold 300 "$dir/stop"
wait_lines "$dir" 90 7 'PASS .* holding' || exit 1
count() {  # count FILE HOW
  sed -n "s/^troupe_control_tree_hits_total{how=\"$2\",process_set=\"0\"} //p" "$1"
}
for r in 0 1 2 3 4 5 6; do
  scrape $((base + 1 + r)) > "$dir/$r.txt" || { echo "FAIL: no metrics from rank $r"; exit 1; }
  aggregated=$(count "$dir/$r.txt" aggregated) passed=$(count "$dir/$r.txt" passed)
  echo "rank $r: aggregated $aggregated, passed $passed"
  if [ "$r" = 1 ] || [ "$r" = 4 ]; then
    [ $((aggregated + passed)) -ge 290 ] && [ $((aggregated * 2)) -ge 290 ] \
      || { echo "FAIL: inner node $r sent up too few hits, or too few aggregated"; exit 1; }
  else
    [ "$aggregated" = 0 ] && [ "$passed" = 0 ] \
      || { echo "FAIL: rank $r is no inner node but counted hits"; exit 1; }
  fi
done
finish_job "$dir" || exit 1
echo "PASS: the inner nodes counted their subtrees' hits"
