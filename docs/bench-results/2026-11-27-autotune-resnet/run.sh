#!/bin/bash
# issue 13 on the Intel host of 2026-11-27: the ResNet-50 row, settings
# shuffled per round, as on 2026-11-25 (its run.sh, written into this folder)
exec bash /work/main/docs/bench-results/2026-11-25-autotune-resnet/run.sh \
  docs/bench-results/2026-11-27-autotune-resnet
