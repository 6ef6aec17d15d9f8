#!/usr/bin/env bash
# README command (b): install, build, run the whole suite (unit and
# multi-process tests under ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 300 -j1
