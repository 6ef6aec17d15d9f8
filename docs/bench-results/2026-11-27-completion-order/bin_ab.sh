# bin_ab.sh OUT N MODE WORKLOAD ARGS: alternates /tmp/bin_before_rev (before) and build/bin (after)
out=$1 n=$2 mode=$3 w=$4; shift 4
: > "$out"
for i in $(seq "$n"); do
  for b in before after; do
    dir=/tmp/bin_before_rev; [ $b = after ] && dir=/work/main/build/bin
    flock /tmp/troupe-build.lock $dir/troupe-run --$mode -np 2 $dir/allreduce_bench --only "$w" --json /tmp/ab/$b.json "$@" >/dev/null 2>&1
    echo "$b: $(/usr/bin/python3 /tmp/med.py /tmp/ab/$b.json)" >> "$out"
  done
done
/usr/bin/python3 /tmp/ratio.py "$out"
