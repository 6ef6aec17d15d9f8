B=/work/main/build/bin
for r in 1 2 3; do
 for m in mpi gloo; do
  for b in auto none; do
   TROUPE_CPU_BINDING=$b $B/troupe-run --$m -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json n-$m$b-$r.json >/dev/null 2>&1
  done
 done
done
