#!/bin/bash
r=${OMPI_COMM_WORLD_RANK:-x}
exec perf stat -x, -e task-clock,context-switches -o $STATOUT.$r.txt "$@"
