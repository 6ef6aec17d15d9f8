#!/usr/bin/env bash
# lose_peer_mpi.sh TROUPE_RUN CHECK VICTIM NP MAX_JOB_SECONDS
# Under MPI, the victim freezes (SIGSTOP) while the others are blocked with
# it in a 64 MiB MPI_Allreduce, which nothing can interrupt. Once the
# heartbeat reports the loss, a survivor still blocked after the MPI
# backend's grace ends the job with MPI_Abort, saying why: troupe-run must
# exit non-zero within MAX_JOB_SECONDS (it used to hang until its own
# --timeout) and the output must carry that reason.
set -u
run=$1 check=$2 victim=$3 np=$4 max_job=$5
stamp=$(mktemp)
out=$(mktemp)
trap 'rm -f "$stamp" "$out"' EXIT

start=$(date +%s)
TROUPE_HEARTBEAT_TIMEOUT_SECONDS=3 timeout 90 "$run" --mpi --timeout 60 -np "$np" "$check" \
  lose-peer stop-busy "$victim" "$stamp" >"$out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
cat "$out"
echo "job ended after ${took} s with status $rc"
if [ "$took" -gt "$max_job" ]; then
  echo "FAIL: the job took more than $max_job s to end"
  exit 1
fi
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
  echo "FAIL: troupe-run exited $rc; want a non-zero status from the lost job"
  exit 1
fi
if ! grep -q "was lost" "$out"; then
  echo "FAIL: no survivor reported the lost rank $victim"
  exit 1
fi
if ! grep -q "MPI allreduce is still blocked .* after a peer was lost; MPI cannot interrupt it" "$out"; then
  echo "FAIL: the job did not say why it ended"
  exit 1
fi
echo "PASS: the job ended with MPI_Abort, saying why, after rank $victim froze"
