#!/usr/bin/env bash
# Whether MPI yields a waiting rank's core, as each rank reports it (asked
# of Open MPI through MPI_T; the actor scheduler stops polling early where
# it does): not by default, yes where the user says so
# (OMPI_MCA_mpi_yield_when_idle=1) and where mpirun oversubscribes the
# host, unless the user says no. Every collective's result stays exact
# (collective_check ops).
#   mpi_yield.sh TROUPE_RUN COLLECTIVE_CHECK
set -euo pipefail
run=$1 check=$2
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# job NAME NP [VAR=VALUE...]: the job's log in $logs/NAME
job() {
  local name=$1 np=$2
  shift 2
  if ! env TROUPE_LOG_LEVEL=info "$@" "$run" --mpi -np "$np" "$check" ops >"$logs/$name" 2>&1; then
    echo "FAIL: job '$name' failed:"; tail -20 "$logs/$name"; exit 1
  fi
}

# expect NAME WORD N: N ranks of job NAME say "MPI WORD its core"
expect() {
  local got
  got=$(grep -c "MPI $2 its core while it waits" "$logs/$1" || true)
  if [ "$got" -ne "$3" ]; then
    echo "FAIL: job '$1': $3 rank(s) should say 'MPI $2 its core', $got do:"
    grep "its core" "$logs/$1" || true
    exit 1
  fi
  echo "PASS: job '$1': $3 rank(s) say 'MPI $2 its core'"
}

job one_rank 1
expect one_rank keeps 1
job user_says_yes 2 OMPI_MCA_mpi_yield_when_idle=1
expect user_says_yes yields 2
cpus=$(nproc)
if [ "$cpus" -le 4 ]; then  # one rank more than the host's slots
  job oversubscribed $((cpus + 1))
  expect oversubscribed yields $((cpus + 1))
  job oversubscribed_user_says_no $((cpus + 1)) OMPI_MCA_mpi_yield_when_idle=0
  expect oversubscribed_user_says_no keeps $((cpus + 1))
fi
