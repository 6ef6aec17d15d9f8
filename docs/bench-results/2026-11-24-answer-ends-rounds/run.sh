#!/usr/bin/env bash
# scale_bench at b1355aa (OLD: built from a worktree of it, same CMake
# options) against 5c30a4b (NEW: inner nodes end their rounds at each
# response list, timed with the node), alternating, 1,024 ranks, fanout 16.
# Usage: OLD=path/to/old/scale_bench NEW=build/bin/scale_bench bash run.sh
set -eu
for i in 1 2 3; do
  for v in "$OLD" "$NEW"; do
    for mode in "--steps 2 --cache off" "--steps 2 --cache on --lists tensor" "--steps 3 --cache on"; do
      # shellcheck disable=SC2086
      flock /tmp/troupe-build.lock "$v" --ranks 1024 --order random $mode --fanout 16 2>/dev/null |
        awk -v v="$v" -v m="$mode" '$1=="1024" {print v, m, "coord", $3, "node", $4}'
    done
  done
done | sort
