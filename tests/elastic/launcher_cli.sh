#!/usr/bin/env bash
# Command-line handling: hosts, hostfiles, knob flags, limits and errors.
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Runs troupe-run, expecting exit code $1; output lands in $dir/out, $dir/err.
expect() {
  local want=$1 rc=0
  shift
  timeout 30 "$run" "$@" >"$dir/out" 2>"$dir/err" || rc=$?
  [ "$rc" = "$want" ] || fail "'$*': exit code $rc, want $want; $(cat "$dir/err")"
}

expect 0 --help
grep -q -- '--log-level' "$dir/out" || fail "help lacks the knob flags"
expect 0 --version
grep -q '^Troupe v[0-9]' "$dir/out" || fail "version: $(cat "$dir/out")"
# horovodrun's short names.
expect 0 -v
grep -q '^Troupe v[0-9]' "$dir/out" || fail "-v: $(cat "$dir/out")"
expect 0 -cb
grep -q 'Available Tensor Operations' "$dir/out" || fail "-cb: $(cat "$dir/out")"
printf 'localhost slots=1\n' > "$dir/one-host"
expect 0 -np 1 -hostfile "$dir/one-host" -p 2222 -i /dev/null sh -c 'echo $TROUPE_RANK'
[ "$(cat "$dir/out")" = '[0]<stdout>:0' ] || fail "-hostfile/-p/-i: $(cat "$dir/out")"
# --verbose (horovodrun's) says what starts where before it starts.
expect 0 --verbose -np 2 --cache-capacity 7 --cpu-binding none sh -c 'echo started'
grep -q '^troupe-run: TROUPE_CACHE_CAPACITY=7$' "$dir/err" || fail "verbose knobs: $(cat "$dir/err")"
grep -q '^troupe-run: rank 1 on localhost (local rank 1 of 2): sh -c echo started$' "$dir/err" \
  || fail "verbose ranks: $(cat "$dir/err")"
# --cpu-binding: "cpu" gives each rank of the host a CPU of its own (and says
# which in TROUPE_CPU); "runtime" gives the rank's runtime threads one
# (TROUPE_RUNTIME_CPU) and leaves the process unbound; "auto" binds the
# ranks where a one-host job has one rank per CPU, and with --shm 0 in Gloo
# mode pins only their runtime threads (Gloo's TCP transport is slower
# bound); more ranks than CPUs cannot each have one.
cpus=$(nproc)
allowed() { grep Cpus_allowed_list /proc/self/status | cut -f2; }
show='echo "cpu=$TROUPE_CPU allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
show_runtime='echo "runtime=$TROUPE_RUNTIME_CPU cpu=$TROUPE_CPU allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
expect 0 --verbose -np 1 --cpu-binding cpu sh -c "$show"
grep -q '^troupe-run: rank 0 on localhost (local rank 0 of 1, bound to CPU [0-9]*): ' "$dir/err" \
  || fail "verbose binding: $(cat "$dir/err")"
grep -Eq '^\[0\]<stdout>:cpu=([0-9]+) allowed=\1$' "$dir/out" || fail "cpu binding: $(cat "$dir/out")"
expect 0 -np "$cpus" --cpu-binding cpu sh -c "$show"
[ "$(grep -Ec '<stdout>:cpu=([0-9]+) allowed=\1$' "$dir/out")" = "$cpus" ] &&
  [ "$(sort -u -t= -k2,2 "$dir/out" | wc -l)" = "$cpus" ] \
  || fail "cpu binding of $cpus ranks: $(cat "$dir/out")"
expect 0 -np "$cpus" sh -c "$show"
[ "$(grep -Ec '<stdout>:cpu=([0-9]+) allowed=\1$' "$dir/out")" = "$cpus" ] &&
  [ "$(sort -u -t= -k2,2 "$dir/out" | wc -l)" = "$cpus" ] \
  || fail "auto binding in Gloo mode: $(cat "$dir/out")"
expect 0 -np "$cpus" --shm 0 sh -c "$show_runtime"
[ "$(grep -Ec "<stdout>:runtime=[0-9]+ cpu= allowed=$(allowed)$" "$dir/out")" = "$cpus" ] &&
  [ "$(sort -u -t= -k2,2 "$dir/out" | wc -l)" = "$cpus" ] \
  || fail "auto binding in Gloo mode over TCP: $(cat "$dir/out")"
expect 0 --verbose -np 1 --cpu-binding runtime sh -c "$show_runtime"
grep -q '^troupe-run: rank 0 on localhost (local rank 0 of 1, runtime threads on CPU [0-9]*): ' \
  "$dir/err" || fail "verbose runtime binding: $(cat "$dir/err")"
grep -Eq "^\[0\]<stdout>:runtime=[0-9]+ cpu= allowed=$(allowed)$" "$dir/out" \
  || fail "runtime binding: $(cat "$dir/out")"
expect 0 -np "$cpus" --cpu-binding none sh -c "$show_runtime"
[ "$(grep -c "<stdout>:runtime= cpu= allowed=$(allowed)$" "$dir/out")" = "$cpus" ] \
  || fail "no binding: $(cat "$dir/out")"
if command -v mpirun >/dev/null; then
  expect 0 --verbose --mpi -np "$cpus" true
  grep -q -- '--map-by hwthread --bind-to hwthread' "$dir/err" || fail "auto, mpirun: $(cat "$dir/err")"
  # Threads the user pins (--thread-affinity) keep the process's CPUs.
  expect 0 --verbose --mpi -np "$cpus" --thread-affinity 0 true
  grep -q -- '--bind-to none' "$dir/err" || fail "auto next to --thread-affinity: $(cat "$dir/err")"
  expect 2 --mpi -np 1 --cpu-binding runtime true
  grep -q -- '--cpu-binding runtime is for troupe-run' "$dir/err" || fail "runtime, mpirun: $(cat "$dir/err")"
fi
expect 2 -np $((cpus + 1)) --cpu-binding cpu true
grep -q -- "--cpu-binding cpu: $((cpus + 1)) ranks on this host but only $cpus CPUs" "$dir/err" \
  || fail "too many ranks to bind: $(cat "$dir/err")"
expect 2 -np 1 --cpu-binding tight true
grep -q "TROUPE_CPU_BINDING='tight'" "$dir/err" || fail "bad binding: $(cat "$dir/err")"
# horovodrun --check-build's report, no -np needed.
expect 0 --check-build
grep -q '^Available Tensor Operations:' "$dir/out" || fail "check-build: $(cat "$dir/out")"
grep -Eq '^    \[(X| )\] Gloo$' "$dir/out" || fail "check-build lacks Gloo: $(cat "$dir/out")"

# Another host is started over ssh: without one on PATH, that is the error.
mkdir "$dir/bin" && ln -s "$(command -v timeout)" "$dir/bin/timeout"
PATH="$dir/bin" expect 127 -np 1 -H remote-node:1 true
grep -q "cannot start 'ssh' for rank 0" "$dir/err" || fail "remote host: $(cat "$dir/err")"
expect 2 -np 1 --mpi --ssh-port 2222 true
grep -q -- '--ssh-port and --ssh-identity-file are for troupe-run' "$dir/err" \
  || fail "ssh flags with --mpi: $(cat "$dir/err")"
expect 2 -np 1 --ssh-port 0 true
expect 2 -np 5 -H localhost:2,127.0.0.2:2 true
grep -q '5 ranks' "$dir/err" || fail "too many ranks: $(cat "$dir/err")"
expect 2 -np 2 --bogus-flag true
grep -q "unknown option '--bogus-flag'" "$dir/err" || fail "$(cat "$dir/err")"
expect 2 -np 2
expect 2 true
expect 2 -np 2 --log-level loud true
grep -q 'TROUPE_LOG_LEVEL' "$dir/err" || fail "bad knob: $(cat "$dir/err")"

# The machine's own name counts as local.
expect 0 -np 2 -H "$(hostname):2" sh -c 'echo $TROUPE_HOSTNAME'
[ "$(cut -d: -f2 "$dir/out" | sort -u)" = "$(hostname)" ] || fail "$(cat "$dir/out")"

# Hostfile, both syntaxes, with comments.
printf '# two simulated hosts\nlocalhost slots=1\n127.0.0.1:2  # second\n' \
  >"$dir/hosts"
expect 0 -np 3 --hostfile "$dir/hosts" sh -c 'echo $TROUPE_RANK $TROUPE_HOSTNAME $TROUPE_LOCAL_RANK'
expected=$'[0]<stdout>:0 localhost 0\n[1]<stdout>:1 127.0.0.1 0\n[2]<stdout>:2 127.0.0.1 1'
[ "$(sort "$dir/out")" = "$expected" ] || fail "hostfile: $(cat "$dir/out")"
expect 2 -np 1 --hostfile "$dir/hosts" -H localhost:1 true

# Knob flags set the workers' variables; -np inside the command is left alone.
expect 0 -np 1 --log-level debug --start-timeout 12 -- \
  sh -c 'echo $TROUPE_LOG_LEVEL $TROUPE_START_TIMEOUT "$@"' x -np 5
[ "$(cat "$dir/out")" = '[0]<stdout>:debug 12 -np 5' ] || fail "$(cat "$dir/out")"
expect 0 -np=1 --scheduler-threads=3 sh -c 'echo $TROUPE_SCHEDULER_THREADS'
[ "$(cat "$dir/out")" = '[0]<stdout>:3' ] || fail "$(cat "$dir/out")"
# --autotune takes no value (horovodrun's form): the command follows it.
expect 0 -np 1 --autotune --autotune-log-file /tmp/x.csv sh -c 'echo $TROUPE_AUTOTUNE $TROUPE_AUTOTUNE_LOG'
[ "$(cat "$dir/out")" = '[0]<stdout>:1 /tmp/x.csv' ] || fail "$(cat "$dir/out")"
expect 2 -np 1 --autotune-steps-per-sample 0 true
grep -q 'TROUPE_AUTOTUNE_STEPS_PER_SAMPLE' "$dir/err" || fail "bad knob: $(cat "$dir/err")"

# A flag without a value may come before -np.
expect 0 --autotune --hierarchical-allreduce -np 1 sh -c 'echo $TROUPE_AUTOTUNE'
[ "$(cat "$dir/out")" = '[0]<stdout>:1' ] || fail "flag before -np: $(cat "$dir/out")"

# horovodrun's names for knobs troupe-run names otherwise.
# horovodrun's --disable-cache is about its cache of host checks, which
# troupe-run does not keep: the response cache stays on.
expect 0 --no-stall-check -np 1 --fusion-threshold-mb 4 --disable-cache \
  --stall-check-warning-time-seconds 7 --stall-check-shutdown-time-seconds 9 \
  --timeline-mark-cycles --log-without-timestamp sh -c 'echo $TROUPE_FUSION_THRESHOLD \
  ${TROUPE_CACHE_CAPACITY:-unset} $TROUPE_STALL_CHECK_DISABLE $TROUPE_STALL_CHECK_TIME_SECONDS \
  $TROUPE_STALL_SHUTDOWN_TIME_SECONDS $TROUPE_TIMELINE_MARK_CYCLES $TROUPE_LOG_HIDE_TIME'
[ "$(cat "$dir/out")" = '[0]<stdout>:4194304 unset 1 7 9 1 1' ] \
  || fail "horovodrun names: $(cat "$dir/out")"
expect 0 -np 1 --no-hierarchical-allreduce --no-hierarchical-allgather \
  sh -c 'echo $TROUPE_HIERARCHICAL_ALLREDUCE $TROUPE_HIERARCHICAL_ALLGATHER'
[ "$(cat "$dir/out")" = '[0]<stdout>:0 0' ] || fail "--no-hierarchical-*: $(cat "$dir/out")"
expect 2 -np 1 --hierarchical-allreduce --no-hierarchical-allreduce true
expect 2 -np 1 --fusion-threshold 5 --fusion-threshold-mb 4 true
grep -q -- '--fusion-threshold-mb and --fusion-threshold both set TROUPE_FUSION_THRESHOLD' \
  "$dir/err" || fail "both names: $(cat "$dir/err")"
expect 2 -np 1 --fusion-threshold-mb 1.5 true
grep -q -- "--fusion-threshold-mb: '1.5' is not a whole number" "$dir/err" \
  || fail "MiB: $(cat "$dir/err")"
expect 2 -np 1 --stall-check-warning-time-seconds soon true
grep -q 'TROUPE_STALL_CHECK_TIME_SECONDS' "$dir/err" || fail "bad value: $(cat "$dir/err")"

# horovodrun's --config-file: its YAML sections set the knobs; flags given
# win; keys Troupe has no use for are warned about, not fatal. A build
# without yaml-cpp (the GPU kit's) says so instead, and these are skipped.
printf 'params: {}\n' > "$dir/empty.yaml"
timeout 30 "$run" -np 1 --config-file "$dir/empty.yaml" true >/dev/null 2>"$dir/err" || true
if grep -q 'built without yaml-cpp' "$dir/err"; then
  echo "config file checks skipped: $(cat "$dir/err")"
else
cat > "$dir/config.yaml" <<'YAML'
params:
  fusion_threshold_mb: 32
  cycle_time_ms: 10
  cache_capacity: 2048
  hierarchical_allreduce: true
  hierarchical_allgather: false
  torus_allreduce: false
autotune:
  enabled: true
  log_file: /tmp/autotune_log.csv
  warmup_samples: 5
  steps_per_sample: 20
  bayes_opt_max_samples: 50
  gaussian_process_noise: 0.9
timeline:
  filename: /tmp/timeline.json
  mark_cycles: true
stall_check:
  enabled: false
  warning_time_seconds: 120
  shutdown_time_seconds: 240
library_options:
  mpi_threads_disable: true
  num_nccl_streams: 1
  ccl_bgt_affinity: 1
  gloo_timeout_seconds: 60
logging:
  level: ERROR
  hide_timestamp: true
controller: gloo
YAML
expect 0 -np 1 --config-file "$dir/config.yaml" --cycle-time-ms 5 sh -c 'echo \
  $TROUPE_FUSION_THRESHOLD $TROUPE_CYCLE_TIME $TROUPE_CACHE_CAPACITY \
  $TROUPE_HIERARCHICAL_ALLREDUCE $TROUPE_HIERARCHICAL_ALLGATHER $TROUPE_AUTOTUNE \
  $TROUPE_AUTOTUNE_LOG $TROUPE_AUTOTUNE_WARMUP_SAMPLES $TROUPE_AUTOTUNE_STEPS_PER_SAMPLE \
  $TROUPE_AUTOTUNE_BAYES_OPT_MAX_SAMPLES $TROUPE_AUTOTUNE_GAUSSIAN_PROCESS_NOISE \
  $TROUPE_TIMELINE $TROUPE_TIMELINE_MARK_CYCLES $TROUPE_STALL_CHECK_DISABLE \
  $TROUPE_STALL_CHECK_TIME_SECONDS $TROUPE_STALL_SHUTDOWN_TIME_SECONDS \
  $TROUPE_MPI_THREADS_DISABLE $TROUPE_NUM_NCCL_STREAMS $TROUPE_GLOO_TIMEOUT_SECONDS \
  $TROUPE_LOG_LEVEL $TROUPE_LOG_HIDE_TIME $TROUPE_CPU_OPERATIONS'
want='[0]<stdout>:33554432 5 2048 1 0 1 /tmp/autotune_log.csv 5 20 50 0.9 /tmp/timeline.json'
want+=' 1 1 120 240 1 1 60 ERROR 1 gloo'
[ "$(cat "$dir/out")" = "$want" ] || fail "config file: $(cat "$dir/out")"
grep -q 'library_options.ccl_bgt_affinity (Troupe has no oneCCL backend) is ignored' "$dir/err" \
  || fail "config file warning: $(cat "$dir/err")"
grep -q 'torus' "$dir/err" && fail "torus_allreduce: false asks for nothing: $(cat "$dir/err")"
printf 'params:\n  cycle_time_ms: soon\n' > "$dir/bad.yaml"
expect 2 -np 1 --config-file "$dir/bad.yaml" true
grep -q "bad.yaml: TROUPE_CYCLE_TIME='soon'" "$dir/err" || fail "config value: $(cat "$dir/err")"
printf 'stall_check:\n  enabled: maybe\n' > "$dir/bad.yaml"
expect 2 -np 1 --config-file "$dir/bad.yaml" true
grep -q "stall_check.enabled: 'maybe' is not true or false" "$dir/err" \
  || fail "config bool: $(cat "$dir/err")"
printf 'params: [1, 2\n' > "$dir/bad.yaml"
expect 2 -np 1 --config-file "$dir/bad.yaml" true
grep -q 'not YAML' "$dir/err" || fail "config syntax: $(cat "$dir/err")"
printf 'controller: mpi\n' > "$dir/mpi.yaml"
expect 2 -np 2 --min-np 1 --config-file "$dir/mpi.yaml" true
grep -q 'controller mpi, but elastic mode runs on Gloo' "$dir/err" \
  || fail "config controller: $(cat "$dir/err")"
expect 2 -np 1 --config-file "$dir/no-such.yaml" true
fi

# horovodrun's library flags: --tcp keeps NCCL off InfiniBand; NCCL runs
# one stream per device; --binding-args are mpirun's.
expect 0 -np 1 --tcp --mpi-threads-disable --num-nccl-streams 1 \
  sh -c 'echo $NCCL_IB_DISABLE $TROUPE_MPI_THREADS_DISABLE $TROUPE_NUM_NCCL_STREAMS'
[ "$(cat "$dir/out")" = '[0]<stdout>:1 1 1' ] || fail "library flags: $(cat "$dir/out")"
expect 2 -np 1 --num-nccl-streams 2 true
grep -q 'one stream per device' "$dir/err" || fail "nccl streams: $(cat "$dir/err")"
expect 0 -np 1 --no-torus-allreduce --torus-allreduce true
grep -q -- '--torus-allreduce is ignored: Troupe has no torus allreduce' "$dir/err" \
  || fail "torus: $(cat "$dir/err")"
expect 2 -np 1 --binding-args="--bind-to core" true
grep -q -- '--binding-args are mpirun' "$dir/err" || fail "binding-args: $(cat "$dir/err")"

# --output-filename (horovodrun's): each rank's tagged lines also go to
# DIR/rank.<rank>/stdout and stderr, the rank padded to the widest.
expect 0 -np 11 --output-filename "$dir/logs" sh -c 'echo out $TROUPE_RANK; echo err $TROUPE_RANK >&2'
[ "$(cat "$dir/logs/rank.00/stdout")" = '[0]<stdout>:out 0' ] || fail "rank.00: $(ls "$dir/logs")"
[ "$(cat "$dir/logs/rank.10/stderr")" = '[10]<stderr>:err 10' ] || fail "rank.10 stderr"
grep -qx '\[10\]<stdout>:out 10' "$dir/out" || fail "not on the console too: $(cat "$dir/out")"
expect 1 -np 1 --output-filename /proc/no-such-dir true
grep -q 'cannot create /proc/no-such-dir' "$dir/err" || fail "bad folder: $(cat "$dir/err")"
# horovodrun's -prefix-timestamp: Python's time.asctime() before each tag,
# in the files too.
stamp='[A-Z][a-z]{2} [A-Z][a-z]{2} [ 1-3][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}'
expect 0 -np 2 -prefix-timestamp --output-filename "$dir/tlogs" sh -c 'echo hi'
grep -Eq "^$stamp\[1\]<stdout>:hi\$" "$dir/out" || fail "timestamps: $(cat "$dir/out")"
grep -Eq "^$stamp\[0\]<stdout>:hi\$" "$dir/tlogs/rank.0/stdout" || fail "timestamps in files"
expect 0 -np 1 --prefix-output-with-timestamp --min-np 1 sh -c 'echo hi >&2'
grep -Eq "^$stamp\[0\]<stderr>:hi\$" "$dir/err" || fail "elastic timestamps: $(cat "$dir/err")"
# Elastic mode: by worker id, the tag of its lines (a rank's number moves
# between workers at a reset).
expect 0 -np 2 --min-np 1 --output-filename "$dir/elogs" \
  sh -c 'echo out $TROUPE_WORKER_ID; echo err $TROUPE_WORKER_ID >&2'
[ "$(cat "$dir/elogs/rank.1/stdout")" = '[1]<stdout>:out 1' ] || fail "elastic: $(ls "$dir/elogs")"
[ "$(cat "$dir/elogs/rank.0/stderr")" = '[0]<stderr>:err 0' ] || fail "elastic stderr"
expect 1 -np 2 --min-np 1 --output-filename /proc/no-such-dir true
grep -q 'cannot create /proc/no-such-dir' "$dir/err" || fail "elastic folder: $(cat "$dir/err")"

# --mpi-args (horovodrun's) are mpirun's: checked before anything starts.
expect 2 -np 1 --mpi-args="-x A" true
grep -q -- '--mpi-args are mpirun' "$dir/err" || fail "mpi-args without --mpi: $(cat "$dir/err")"
expect 2 --mpi -np 1 --mpi-args="-x 'A" true
grep -q 'a quote is left open' "$dir/err" || fail "mpi-args quote: $(cat "$dir/err")"
expect 2 --mpi -np 1 --mpi-args='-x $(id)' true
grep -q 'command substitution is not run' "$dir/err" || fail "mpi-args \$(): $(cat "$dir/err")"

# Horovod's --network-interfaces is --network-interface.
expect 0 -np 1 --network-interfaces lo sh -c 'echo $TROUPE_NETWORK_INTERFACE'
[ "$(cat "$dir/out")" = '[0]<stdout>:lo' ] || fail "$(cat "$dir/out")"

# The job's secret reaches the ranks in an inherited in-memory file, never
# in their environment, and has no flag (a command line is public).
expect 0 -np 2 sh -c 'echo ${TROUPE_SECRET_KEY:-none} $(wc -c < /proc/self/fd/$TROUPE_SECRET_FD)'
[ "$(cut -d: -f2 "$dir/out" | sort -u)" = 'none 64' ] || fail "secret: $(cat "$dir/out")"
expect 2 -np 1 --secret-key abcdefabcdefabcdef true

# Whole-job time limit.
start=$SECONDS
expect 124 -np 2 --timeout 0.5 sleep 60
(( SECONDS - start < 10 )) || fail "timeout took $((SECONDS - start)) s"
grep -q 'time limit' "$dir/err" || fail "timeout: $(cat "$dir/err")"
# The same under --mpi: troupe-run stays mpirun's parent and stops it.
if command -v mpirun >/dev/null; then
  start=$SECONDS
  expect 124 --mpi -np 2 --timeout 0.5 sleep 60
  (( SECONDS - start < 10 )) || fail "timeout, mpirun: took $((SECONDS - start)) s"
  grep -q 'time limit' "$dir/err" || fail "timeout, mpirun: $(cat "$dir/err")"
fi
# Elastic flags are checked before anything starts.
expect 2 -np 2 --min-np 1 --blacklist-cooldown-range 0 5 true
grep -q '1 <= MIN <= MAX <= 3600, got 0 5' "$dir/err" || fail "cooldown: $(cat "$dir/err")"
expect 2 -np 2 --min-np 1 --blacklist-cooldown-range 5 3601 true
expect 2 -np 2 --min-np 3 true
grep -q -- '--min-np 3 is above -np 2' "$dir/err" || fail "min-np: $(cat "$dir/err")"
expect 2 -np 2 --max-np 4 true
grep -q 'need elastic mode' "$dir/err" || fail "max-np alone: $(cat "$dir/err")"
expect 2 -np 2 --min-np 1 --mpi true
expect 2 -np 1 --host-discovery-script 'echo localhost' -H localhost:1 true
# Two values, then the command: the second value is not taken for it.
expect 0 -np 1 --min-np 1 --blacklist-cooldown-range 1 2 sh -c 'echo $TROUPE_ELASTIC $HOROVOD_ELASTIC'
[ "$(cat "$dir/out")" = "[0]<stdout>:1 1" ] || fail "elastic env: $(cat "$dir/out")"

echo PASS
