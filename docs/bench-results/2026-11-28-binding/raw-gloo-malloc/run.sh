B=/work/main/build/bin
for r in 1 2 3; do
  $B/troupe-run --gloo -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json only-$r.json >/dev/null 2>&1
  $B/troupe-run --gloo -np 2 $B/allreduce_bench --rounds 3 --json both-$r.json >/dev/null 2>&1
  MALLOC_MMAP_THRESHOLD_=131072 $B/troupe-run --gloo -np 2 $B/allreduce_bench --rounds 3 --json thr-$r.json >/dev/null 2>&1
done
