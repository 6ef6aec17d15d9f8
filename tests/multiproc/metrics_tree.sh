#!/usr/bin/env bash
# metrics_tree.sh TROUPE_RUN CHECK
# 7 ranks in a control tree of fanout 2 run 300 checked allreduces of ten
# names one after another (290 cache hits) and hold. The inner nodes (set
# ranks 1 and 4, over [1, 4) and [4, 7)) must count the hits they sent up
# in troupe_control_tree_hits_total: together at least 290 hits or ranges,
# most of them aggregated for the whole subtree; the root and the leaves
# count none. The first round of each name is full requests: the inner
# nodes count them in troupe_control_tree_requests_total, each merged for
# the whole subtree unless the hold sent it up (a rank over 1 s late:
# counted in troupe_control_tree_hold_expired_total). Members send nothing
# before they are placed, and a node keeps its children's lists until it
# is: no list may bypass a node (the error that says so). The control
# connections are that tree: troupe_control_links is 2 on the root, 3 on
# the inner nodes, 1 on the leaves.
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
job_dir
base=$(free_base 8) || exit 1
launch "$run" "$dir" "$base" -np 7 --control-fanout 2 "$check" hold 300 "$dir/stop"
wait_lines "$dir" 90 7 'PASS .* holding' || exit 1
count() {  # count FILE HOW [FAMILY]
  sed -n "s/^troupe_control_tree_${3:-hits}_total{how=\"$2\",process_set=\"0\"} //p" "$1"
}
expired() {  # expired FILE WHAT
  sed -n "s/^troupe_control_tree_hold_expired_total{process_set=\"0\",what=\"$2\"} //p" "$1"
}
for r in 0 1 2 3 4 5 6; do
  scrape $((base + 1 + r)) > "$dir/$r.txt" || { echo "FAIL: no metrics from rank $r"; exit 1; }
  aggregated=$(count "$dir/$r.txt" aggregated) passed=$(count "$dir/$r.txt" passed)
  merged=$(count "$dir/$r.txt" merged requests) full=$(count "$dir/$r.txt" passed requests)
  late=$(expired "$dir/$r.txt" requests)
  links=$(sed -n 's/^troupe_control_links //p' "$dir/$r.txt")
  echo "rank $r: hits aggregated $aggregated, passed $passed; requests merged $merged, passed $full, held past the hold $late; control links $links"
  want=$(case $r in 0) echo 2;; 1|4) echo 3;; *) echo 1;; esac)
  [ "$links" = "$want" ] || { echo "FAIL: rank $r holds $links control links, not $want"; exit 1; }
  if [ "$r" = 1 ] || [ "$r" = 4 ]; then
    [ $((aggregated + passed)) -ge 290 ] && [ $((aggregated * 2)) -ge 290 ] \
      || { echo "FAIL: inner node $r sent up too few hits, or too few aggregated"; exit 1; }
    [ -n "$late" ] && [ $((merged + late)) -eq 10 ] \
      || { echo "FAIL: inner node $r merged $merged of the 10 first rounds, $late held past the hold"; exit 1; }
  else
    [ "$aggregated" = 0 ] && [ "$passed" = 0 ] && [ "$merged" = 0 ] && [ "$full" = 0 ] \
      || { echo "FAIL: rank $r is no inner node but counted hits or requests"; exit 1; }
  fi
done
if grep -q "has no control-tree children" "$dir/job.log"; then
  cat "$dir/job.log"; echo "FAIL: a child's list reached its node before the node's place"; exit 1
fi
finish_job "$dir" || exit 1
echo "PASS: the inner nodes counted their subtrees' hits"
