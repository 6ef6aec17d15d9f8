#!/usr/bin/env bash
# The scale benchmark after e853d03 (hit_aggregator without scans; the
# bench without glibc fastbins) and ca1e8e2 (full requests merged in the
# tree). Run from the project root: bash docs/bench-results/2026-11-24-request-merge/run.sh
# (R=DIR for another output folder: the second pass went to pass2/).
set -eu
R=${R:-docs/bench-results/2026-11-24-request-merge}
b=build/bin/scale_bench
for f in 0 16; do $b --ranks 1024 --order random --steps 3 --cache on --fanout $f \
  --json $R/resnet-1024-cached-f$f.json; done
$b --ranks 256,1024,4096 --order random --steps 3 --cache on --fanout 16 --json $R/resnet-cached-f16.json
for run in 1 2; do
  for f in 0 16 8; do $b --ranks 1024 --order random --steps 2 --cache on --lists tensor \
    --fanout $f --json $R/resnet-1024-pertensor-f$f-run$run.json; done
  for f in 0 16 8; do $b --ranks 1024 --order random --steps 2 --cache off --fanout $f \
    --json $R/resnet-1024-uncached-f$f-run$run.json; done
done
$b --ranks 256,4096 --order random --steps 2 --cache off --fanout 16 --json $R/resnet-uncached-f16.json
for f in 0 16; do $b --workload small --ranks 1024 --order random --steps 3 --cache on \
  --fanout $f --json $R/small-1024-cached-f$f.json; done
$b --ranks 1024,4096 --order random --steps 3 --cache on --fanout 16 --ranks-per-host 8 \
  --json $R/resnet-cached-f16-hosts8.json
$b --ranks 1024 --order random --steps 2 --cache on --lists tensor --fanout 16 --ranks-per-host 8 \
  --json $R/resnet-1024-pertensor-f16-hosts8.json
$b --ranks 1024 --order random --steps 2 --cache off --fanout 16 --ranks-per-host 8 \
  --json $R/resnet-1024-uncached-f16-hosts8.json
