#!/bin/bash
# before (/tmp/ab_before) vs after (build/bin/allreduce_bench), alternating
cd /work/main
for pass in 1 2; do for v in before after; do
  b=build/bin/allreduce_bench; [ $v = before ] && b=/tmp/ab_before
  for sz in 1048576 16777216 67108864 268435456; do
    build/bin/troupe-run --mpi -np 2 $b --rounds 3 --idle-seconds 1 --only allreduce:$sz --json /tmp/chunk1/$v-$sz-$pass.json >/dev/null 2>&1 || echo fail $v $sz
  done
done; done
