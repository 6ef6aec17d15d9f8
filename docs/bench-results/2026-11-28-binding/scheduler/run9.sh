B=/work/main/build/bin
for r in 1 2 3; do
 for s in 2 1; do
  TROUPE_SCHEDULER_THREADS=$s $B/troupe-run --mpi -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json st-$s-$r.json >/dev/null 2>&1
 done
done
