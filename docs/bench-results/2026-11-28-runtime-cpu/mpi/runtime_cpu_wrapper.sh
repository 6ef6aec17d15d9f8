#!/bin/bash
export TROUPE_RUNTIME_CPU=$OMPI_COMM_WORLD_LOCAL_RANK
exec "$@"
