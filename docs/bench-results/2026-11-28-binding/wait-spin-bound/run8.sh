B=/work/main/build/bin
for r in 1 2 3; do
 for s in 0 100 2000; do
  TROUPE_WAIT_SPIN_US=$s $B/troupe-run --mpi -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json w2-m$s-$r.json >/dev/null 2>&1
  TROUPE_WAIT_SPIN_US=$s $B/troupe-run --gloo -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json w2-g$s-$r.json >/dev/null 2>&1
 done
done
