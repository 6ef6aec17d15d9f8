B=/work/main/build/bin
for r in 1 2 3; do
 for s in 0 2000; do
  XSPIN_READER=$s $B/troupe-run --mpi -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json r$s-$r.json >/dev/null 2>&1
 done
done
