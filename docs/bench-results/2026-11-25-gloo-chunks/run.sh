#!/bin/bash
# Gloo mode (shm on), before = chunk 0 (03924c6), after = the communicator's 1 MiB, alternating
cd /work/main
for pass in 1 2 3; do for v in before after; do
  b=/tmp/ab_after_gc; [ $v = before ] && b=/tmp/ab_before_gc
  for w in resnet50 allreduce:67108864 allreduce:268435456 small_tensors allreduce:1048576; do
    build/bin/troupe-run --gloo -np 2 $b --rounds 3 --idle-seconds 1 --only $w --json /tmp/gc2/$v-${w/:/_}-$pass.json >/dev/null 2>&1 || echo fail $v $w
  done
done; done
