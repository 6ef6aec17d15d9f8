B=/work/main/build/bin
for r in 1 2 3; do
  XSPIN_READER=0 $B/troupe-run --gloo -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json g0-$r.json >/dev/null 2>&1
  XSPIN_READER=2000 $B/troupe-run --gloo -np 2 $B/allreduce_bench --troupe-only --rounds 3 --json g2000-$r.json >/dev/null 2>&1
  XFORCEPOLL=1 XSPIN_READER=2000 $B/troupe-run --gloo -np 2 bash -c 'exec taskset -c $TROUPE_LOCAL_RANK "$@"' _ $B/allreduce_bench --troupe-only --rounds 3 --json gb2000-$r.json >/dev/null 2>&1
  XFORCEPOLL=1 XSPIN_READER=0 $B/troupe-run --gloo -np 2 bash -c 'exec taskset -c $TROUPE_LOCAL_RANK "$@"' _ $B/allreduce_bench --troupe-only --rounds 3 --json gb0-$r.json >/dev/null 2>&1
done
