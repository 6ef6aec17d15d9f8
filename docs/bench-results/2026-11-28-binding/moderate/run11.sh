B=/work/main/build/bin
for r in 1 2 3; do
  XMODERATE0=1 $B/troupe-run --mpi -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json mo-b-$r.json >/dev/null 2>&1
  XMODERATE0=1 XAGGR=1 $B/troupe-run --mpi -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json mo-c-$r.json >/dev/null 2>&1
  XMODERATE0=1 $B/troupe-run --gloo --cpu-binding cpu -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json mo-g-$r.json >/dev/null 2>&1
  XMODERATE0=1 $B/troupe-run --gloo -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json mo-u-$r.json >/dev/null 2>&1
  $B/troupe-run --gloo -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json mo-v-$r.json >/dev/null 2>&1
done
