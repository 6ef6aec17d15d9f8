# ab.sh OUT N MODE WORKLOAD [extra args]: alternates base and new builds N times
out=$1 n=$2 mode=$3 w=$4; shift 4
: > "$out"
for i in $(seq "$n"); do
  for b in base new; do
    dir=/tmp/base; [ $b = new ] && dir=/work/main
    flock /tmp/troupe-build.lock $dir/build/bin/troupe-run --$mode -np 2 $dir/build/bin/allreduce_bench --only "$w" --json /tmp/ab/$b.json "$@" >/dev/null 2>&1
    echo "$b: $(/usr/bin/python3 /tmp/med.py /tmp/ab/$b.json)" >> "$out"
  done
done
/usr/bin/python3 /tmp/ratio.py "$out"
