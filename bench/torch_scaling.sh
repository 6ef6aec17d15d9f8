#!/usr/bin/env bash
# Scaling of the PyTorch synthetic benchmark: total img/sec on 2 ranks over
# img/sec on 1 rank (resnet18, batch 16, no special flags), next to its
# references on this host (bench/torch_scaling_refs.py): 2 ranks training
# on their own side by side, the same in lockstep (waiting for each other
# once per step, as data-parallel training must) without gradients, and
# torch.distributed's DDP over gloo.
# TROUPE_SCALING_ROUNDS=N runs the five jobs N times in turn and reports
# medians: the host's speed drifts between phases, and jobs run side by
# side in time are compared with each other, not with a later phase.
#   bash bench/torch_scaling.sh [build dir] [extra synthetic_benchmark flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
export PYTHONPATH=$build/python
flags=(--model resnet18 --batch-size 16 "$@")
# total NP [--cpu-binding MODE] SCRIPT [flags]
total() {
  local np=$1 line launch=()
  shift
  if [ "$1" = --cpu-binding ]; then
    launch=("$1" "$2")
    shift 2
  fi
  # The job's output goes on to stderr as it comes.
  line=$("$build/bin/troupe-run" "${launch[@]}" -np "$np" /usr/bin/python3 "$@" "${flags[@]}" |
           while IFS= read -r l; do printf '%s\n' "$l" >&2; printf '%s\n' "$l"; done |
           sed -n 's/.*Total img\/sec on [0-9]* CPU(s): \([0-9.]*\).*/\1/p')
  [ -n "$line" ] || { echo "bench/torch_scaling.sh: no img/sec from $*" >&2; exit 1; }
  echo "$line"
}
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
refs=$root/bench/torch_scaling_refs.py
rounds=${TROUPE_SCALING_ROUNDS:-1}
results=()
for ((round = 1; round <= rounds; round++)); do
  one=$(total 1 "$root/examples/pytorch/synthetic_benchmark.py")
  two=$(total 2 "$root/examples/pytorch/synthetic_benchmark.py")
  apart=$(total 2 "$refs" --sync none)
  lockstep=$(total 2 "$refs" --sync step)
  # DDP unbound, as torchrun runs it (bound, Gloo's TCP is several times
  # slower); the other references as troupe-run places Troupe's ranks.
  ddp=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) total 2 --cpu-binding none "$refs" --sync ddp)
  results+=("$one,$two,$apart,$lockstep,$ddp")
done
/usr/bin/python3 - "${results[@]}" <<'PY'
import statistics
import sys
rounds = [list(map(float, r.split(','))) for r in sys.argv[1:]]
for i, r in enumerate(rounds, 1):
    if len(rounds) > 1:
        print('round %d: 1 rank %.1f, 2 ranks %.1f (%.3f), on their own %.1f, lockstep %.1f, '
              'DDP %.1f img/sec' % (i, r[0], r[1], r[1] / r[0], r[2], r[3], r[4]))
# Each ratio within its round (jobs side by side in time), then the median
# over the rounds.
one, two, apart, lockstep, ddp = (statistics.median(col) for col in zip(*rounds))
ratio = [statistics.median(r[k] / r[0] for r in rounds) for k in range(5)]
of_lockstep = statistics.median(r[1] / r[3] for r in rounds)
if len(rounds) > 1:
    print('medians of %d rounds, each ratio taken within its round:' % len(rounds))
print('1 rank: %.1f img/sec, 2 ranks: %.1f img/sec, scaling: %.3f' % (one, two, ratio[1]))
print('references on 2 ranks: on their own %.1f img/sec (%.3f), in lockstep without '
      'gradients %.1f (%.3f), torch DDP over gloo %.1f (%.3f); Troupe reaches %.3f of the '
      'lockstep ceiling' % (apart, ratio[2], lockstep, ratio[3], ddp, ratio[4], of_lockstep))
PY
