#!/usr/bin/env bash
# metrics_prometheus.sh TROUPE_RUN CHECK
# A real Prometheus server (loopback, generated config, temporary data
# directory, 1 s scrape interval) scrapes a 2-rank job and the launcher;
# its query API reports the allreduces each rank ran.
set -u
run=$1 check=$2
here=$(dirname "$0")
. "$here/metrics_lib.sh"
[ -x /usr/bin/prometheus ] || { echo "SKIP: /usr/bin/prometheus not installed"; exit 77; }
dir=$(mktemp -d)
prom_pid=
trap 'touch "$dir/stop"; kill "$job_pid" "$prom_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
n=250
base=$(free_base 4) || exit 1
prom_port=$((base + 3))
cat > "$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: troupe
    static_configs:
      - targets: ['127.0.0.1:$base', '127.0.0.1:$((base + 1))', '127.0.0.1:$((base + 2))']
YML
/usr/bin/prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
  --web.listen-address="127.0.0.1:$prom_port" > "$dir/prometheus.log" 2>&1 &
prom_pid=$!
start_job "$run" "$check" "$dir" "$base" "$n"
wait_holding "$dir" 60 || exit 1
# Until every rank's final count has been scraped (60 s at most), summed
# over the backend label (a CUDA build also has a zero-valued nccl series).
api="http://127.0.0.1:$prom_port/api/v1/query"
deadline=$((SECONDS + 60))
while :; do
  counts=$(curl -s -m 5 -G "$api" \
             --data-urlencode 'query=sum by (instance) (troupe_collective_tensors_total{op="allreduce",status="ok"})')
  ranks=$(curl -s -m 5 -G "$api" --data-urlencode 'query=troupe_rank')
  if /usr/bin/python3 - "$n" "$counts" "$ranks" <<'PY'
import json, sys
n, counts, ranks = int(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    counts = json.loads(counts)["data"]["result"]
    ranks = json.loads(ranks)["data"]["result"]
except (ValueError, KeyError):
    sys.exit(1)
rank_of = {r["metric"]["instance"]: int(float(r["value"][1])) for r in ranks}
seen = {rank_of.get(c["metric"]["instance"]): float(c["value"][1]) for c in counts}
print("prometheus sees", dict(sorted((k, v) for k, v in seen.items() if k is not None)))
sys.exit(0 if seen.get(0) == n and seen.get(1) == n else 1)
PY
  then break; fi
  if [ $SECONDS -ge $deadline ] || ! kill -0 "$prom_pid" 2>/dev/null; then
    tail -20 "$dir/prometheus.log"; echo "FAIL: Prometheus never saw $n allreduces on both ranks"
    exit 1
  fi
  sleep 1
done
# Every target answers: the latest scrape of each succeeded (waited for up
# to 30 s, since one scrape past its 1 s timeout on a loaded host is not a
# failure of the endpoint). On failure, Prometheus's own view of each target
# (its last error) is printed.
deadline=$((SECONDS + 30))
until up=$(curl -s -m 5 -G "$api" --data-urlencode 'query=up') &&
      /usr/bin/python3 -c '
import json, sys
up = {r["metric"]["instance"]: r["value"][1] for r in json.loads(sys.argv[1])["data"]["result"]}
print("up", dict(sorted(up.items())))
sys.exit(0 if len(up) == 3 and all(v == "1" for v in up.values()) else 1)' "$up"; do
  if [ $SECONDS -ge $deadline ]; then
    curl -s -m 5 "http://127.0.0.1:$prom_port/api/v1/targets" | /usr/bin/python3 -c '
import json, sys
for t in json.load(sys.stdin)["data"]["activeTargets"]:
    print(t["scrapeUrl"], t["health"], t["lastError"])'
    echo "FAIL: not every target answered Prometheus"
    exit 1
  fi
  sleep 1
done
finish_job "$dir" || exit 1
echo "PASS: Prometheus scraped the launcher and both ranks with the expected counts"
