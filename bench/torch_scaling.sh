#!/usr/bin/env bash
# Scaling of the PyTorch synthetic benchmark: total img/sec on 2 ranks over
# img/sec on 1 rank (resnet18, batch 16, no special flags).
#   bash bench/torch_scaling.sh [build dir] [extra synthetic_benchmark flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
export PYTHONPATH=$build/python
bench=(/usr/bin/python3 "$root/examples/pytorch/synthetic_benchmark.py" --model resnet18
       --batch-size 16 "$@")
total() {
  "$build/bin/troupe-run" -np "$1" "${bench[@]}" | tee /dev/stderr |
    sed -n 's/.*Total img\/sec on [0-9]* CPU(s): \([0-9.]*\).*/\1/p'
}
one=$(total 1)
two=$(total 2)
/usr/bin/python3 -c "print('1 rank: %s img/sec, 2 ranks: %s img/sec, scaling: %.3f' % ($one, $two, $two / $one))"
