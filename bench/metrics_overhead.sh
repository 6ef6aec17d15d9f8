#!/usr/bin/env bash
# What serving /metrics costs the ranks: 4000 sequential 4-byte allreduces
# on 2 ranks (collective_check hold), with the endpoint on (no scraping)
# and off, rounds alternating so that machine noise hits both alike. Prints
# each round's time (the slower rank) and the medians. Build first:
# cmake --build build --target troupe-run collective_check.
#   flock /tmp/troupe-build.lock bash bench/metrics_overhead.sh [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${TROUPE_BUILD_DIR:-$here/../build}" && pwd)
rounds=${1:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
touch "$dir/stop"  # ranks leave right after the allreduces

# one [--metrics-port BASE]: seconds of the slower rank.
one() {
  timeout 120 "$build/bin/troupe-run" --timeout 100 -np 2 "$@" \
    "$build/bin/collective_check" hold 4000 "$dir/stop" \
    | sed -n 's/.*PASS 4000 allreduces in \([0-9.]*\) s.*/\1/p' | sort -n | tail -1
}

: > "$dir/off"; : > "$dir/on"
for ((r = 1; r <= rounds; r++)); do
  off=$(one)
  on=$(one --metrics-port $((20000 + RANDOM % 9000)))
  echo "round $r: off ${off} s, on ${on} s"
  echo "$off" >> "$dir/off"; echo "$on" >> "$dir/on"
done
median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "median of $rounds: off $(median "$dir/off") s, on $(median "$dir/on") s"
