# env_ab.sh OUT N MODE WORKLOAD CFG... -- ARGS: alternates env settings on the current build
out=$1 n=$2 mode=$3 w=$4; shift 4
cfgs=(); while [ "$1" != "--" ]; do cfgs+=("$1"); shift; done; shift
: > "$out"
for i in $(seq "$n"); do
  for c in "${cfgs[@]}"; do
    flock /tmp/troupe-build.lock env $c /work/main/build/bin/troupe-run --$mode -np 2 /work/main/build/bin/allreduce_bench --only "$w" --json /tmp/ab/e.json "$@" >/dev/null 2>&1
    echo "$c: $(/usr/bin/python3 /tmp/med.py /tmp/ab/e.json)" >> "$out"
  done
done
/usr/bin/python3 /tmp/ratio.py "$out"
