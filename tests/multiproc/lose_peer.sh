#!/usr/bin/env bash
# lose_peer.sh TROUPE_RUN CHECK kill|stop|stop-busy|stop-busy-scatter|noshm-stop-busy-scatter|
#              mpi-stop-busy|mpi-stop-busy-noshm|stop-small|mpi-stop-small-noshm VICTIM NP
#              MAX_SECONDS MAX_JOB_SECONDS
#              [MAX_SHUTDOWN_SECONDS]
# The victim rank dies or freezes while the others wait on a collective.
# Every survivor must fail that collective with an error naming the victim
# within MAX_SECONDS, and troupe-run must exit non-zero (no hang) within
# MAX_JOB_SECONDS. With MAX_SHUTDOWN_SECONDS, every survivor's shutdown()
# must also have returned within that many seconds of the victim's end.
#
# stop-busy-scatter: stop-busy with a reducescatter instead of the
# allreduce; noshm-...: under --shm 0 (Gloo's TCP, no segment).
# stop-small: the others blocked in a cached 4-byte allreduce that their
# negotiators run on their own threads. mpi-stop-small-noshm: the same
# allreduce under --mpi --shm 0, where MPI's call could not be interrupted,
# so it must go to the backend's thread: the job ends as mpi-stop-busy-noshm.
#
# mpi-stop-busy-noshm: stop-busy under --mpi --shm 0, whose calls nothing
# can interrupt. Once the heartbeat reports the loss, a survivor still
# blocked after the MPI backend's grace ends the job with MPI_Abort, saying
# why (it used to hang until troupe-run's time limit): the job must end
# within MAX_JOB_SECONDS with that reason in its output (MAX_SECONDS unused).
# mpi-stop-busy: the same with the allreduce in the host's shared segment,
# whose waits the loss interrupts: every survivor fails the collective
# within MAX_SECONDS, and as MPI cannot finalize without the frozen peer, a
# survivor ends the job with MPI_Abort at exit, saying why.
set -u
run=$1 check=$2 how=$3 victim=$4 np=$5 max=$6 max_job=$7 max_shutdown=${8:-}
stamp=$(mktemp)
out=$(mktemp)
trap 'rm -f "$stamp" "$out"' EXIT

launch=()
case "$how" in
  mpi-stop-busy-noshm|mpi-stop-small-noshm)
    launch=(--mpi --shm 0)
    mpi_says="MPI allreduce is still blocked .* after a peer was lost; MPI cannot interrupt it" ;;
  mpi-stop-busy)
    launch=(--mpi)
    mpi_says="lost a peer; MPI cannot finalize without it, so this rank ends the job with MPI_Abort" ;;
  noshm-*)
    launch=(--shm 0) ;;
esac
case "$how" in
  mpi-stop-small-*) how=stop-small ;;
  mpi-*) how=stop-busy ;;
  noshm-*) how=${how#noshm-} ;;
esac
start=$(date +%s)
timeout 90 "$run" "${launch[@]}" --timeout 60 -np "$np" "$check" lose-peer "$how" "$victim" \
  "$stamp" >"$out" 2>&1
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
if [ -n "${mpi_says:-}" ]; then
  if ! grep -q "$mpi_says" "$out"; then
    echo "FAIL: the job did not say why it ended ($mpi_says)"
    exit 1
  fi
  echo "PASS: the job ended with MPI_Abort, saying why, after rank $victim froze"
  [ "$max" -gt 0 ] || exit 0
fi
survivors=$((np - 1))
detected=$(grep -c "<stdout>:rank [0-9]*: DETECTED after" "$out")
if [ "$detected" -ne "$survivors" ]; then
  echo "FAIL: $detected of $survivors survivors reported the lost rank $victim"
  exit 1
fi
slow=$(grep -o "DETECTED after [0-9.]* s" "$out" | awk -v max="$max" '$3 > max' | wc -l)
if [ "$slow" -ne 0 ]; then
  echo "FAIL: a survivor needed more than $max s to notice"
  exit 1
fi
if [ -n "$max_shutdown" ]; then
  # Sorted, so the slowest survivor comes last.
  times=$(grep -o "SHUT-DOWN after [0-9.]* s" "$out" | awk '{print $3}' | sort -n)
  echo "survivors shut down after (s):" $times
  if [ "$(echo "$times" | grep -c .)" -ne "$survivors" ]; then
    echo "FAIL: not every survivor's shutdown() returned"
    exit 1
  fi
  if [ "$(echo "$times" | awk -v max="$max_shutdown" '$1 > max' | wc -l)" -ne 0 ]; then
    echo "FAIL: a survivor's shutdown() took more than $max_shutdown s after the loss"
    exit 1
  fi
fi
echo "PASS: $survivors survivors failed their pending collective naming rank $victim"
