#!/usr/bin/env bash
# The control plane's TLS cost on the 4-byte allreduce, 2 ranks on this host:
#   flock /tmp/troupe-build.lock bash bench/tls_overhead.sh [--passes N]
# Each pass runs troupe-gloo and troupe-mpi once with TLS (the default) and
# once with --insecure-control-plane 1, alternating, and the medians over all
# samples are printed per backend and mode. Build first: cmake --build build
# --target allreduce_bench troupe-run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${TROUPE_BUILD_DIR:-$here/../build}" && pwd)
python=${PYTHON:-/usr/bin/python3}
passes=4
if [ "${1:-}" = --passes ]; then passes=$2; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for pass in $(seq 1 "$passes"); do
  for backend in gloo mpi; do
    for mode in tls plain; do
      plain=()
      [ "$mode" = plain ] && plain=(--insecure-control-plane 1)
      "$build/bin/troupe-run" --"$backend" -np 2 "${plain[@]}" "$build/bin/allreduce_bench" \
        --only allreduce:4 --troupe-only --rounds 3 --idle-seconds 1 \
        --json "$out/$backend-$mode-$pass.json" > /dev/null
    done
  done
done
"$python" - "$out" <<'PY'
import glob, json, statistics, sys
for backend in ("gloo", "mpi"):
    medians = {}
    for mode in ("tls", "plain"):
        samples = []
        for f in glob.glob(f"{sys.argv[1]}/{backend}-{mode}-*.json"):
            samples += [s for row in json.load(open(f))["series"] for s in row["seconds"]]
        medians[mode] = statistics.median(samples) * 1e6
        print(f"troupe-{backend} {mode}: median {medians[mode]:.1f} us ({len(samples)} samples)")
    print(f"troupe-{backend}: TLS costs {medians['tls'] - medians['plain']:+.1f} us")
PY
