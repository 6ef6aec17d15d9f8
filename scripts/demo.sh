#!/usr/bin/env bash
# README command (a): install, build, and run the demo job on 4 ranks through
# troupe-run. Every rank prints one verified line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/bin/troupe-run -np "${1:-4}" build/bin/troupe-demo
