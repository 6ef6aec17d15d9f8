#!/bin/bash
# ab.sh OUT PASSES "name|troupe-run flags" ...: alternates two builds of
# allreduce_bench (/tmp/ab_old: the backend completes handles, then answers;
# /tmp/ab_new: a bound rank's backend answers first), W (default
# allreduce:4) only, Troupe only, one JSON per job.
out=$1; passes=$2; shift 2; mkdir -p "$out"
for r in $(seq 1 "$passes"); do
  for v in old new; do
    for cfg in "$@"; do
      name=${cfg%%|*}; args=${cfg#*|}; w=${W:-allreduce:4}
      # shellcheck disable=SC2086  # $args: several flags
      flock /tmp/troupe-build.lock build/bin/troupe-run $args -np 2 /tmp/ab_$v --troupe-only \
        --only "$w" --rounds 3 --idle-seconds 1 --json "$out/$name-$v-${w%%:*}-$r.json" >/dev/null 2>&1
    done
  done
done
