#pragma once

// The Troupe C++ API: a Horovod-style collective runtime. All collectives are
// asynchronous and return a handle; none blocks the caller. A tensor on a
// device this build has no backend for (CUDA without a GPU backend) fails
// at submission with invalid_argument.

#include <string>
#include <vector>

#include "troupe/elastic.hpp"
#include "troupe/handle.hpp"
#include "troupe/process_set.hpp"
#include "troupe/tuning.hpp"
#include "troupe/status.hpp"
#include "troupe/types.hpp"

namespace troupe {

/// Starts the runtime of this process: reads its identity from the launcher's
/// environment (troupe-run), or runs as a single rank (size 1) without one.
/// Calling it when already initialized is harmless. Fails with a status
/// naming the step that did not complete before the start timeout.
status init();

/// init(), then registers static process sets (global ranks each), in
/// order, with ids 1, 2, ...; every rank must pass the same lists. When a
/// set fails to register, the runtime is shut down again and the status
/// says why.
status init(const std::vector<std::vector<int>>& process_sets);

/// Stops the runtime; pending collectives fail with status_code::shut_down.
/// init() may be called again afterwards. A runtime still running when the
/// process exits is shut down then (before MPI is finalized).
void shutdown();

/// A child fork()ed after init() keeps the parent's identity (rank(), size(),
/// is_initialized()), not its runtime, whose threads stay in the parent: its
/// collectives fail with status_code::shut_down naming both pids, init() is
/// harmless, shutdown() and exit() leave the parent's runtime and MPI alone.
/// A handle still pending at the fork fails at once in the child (wait(),
/// wait_for() and result() give status_code::shut_down naming both pids;
/// poll() is true); one completed before the fork keeps its result.
bool is_initialized();

/// In-place reset (what elastic training builds on): every process set of
/// this rank stops, pending collectives fail with status_code::reset (a
/// retryable error: Python's HorovodInternalError), and the job moves to
/// its next membership epoch, rebuilding the control plane and the backend
/// for the processes that call reset(): the previous ranks that were
/// neither lost nor shut down, renumbered in their previous order. Same
/// process, same runtime. Process sets other than the global one are gone
/// afterwards. The epoch is the store's (troupe-run's), so every process
/// agrees on it. Bounded by TROUPE_START_TIMEOUT; a failed reset leaves
/// every call failing with status_code::reset until reset() succeeds.
/// Needs troupe-run (under plain mpirun the membership is MPI's).
status reset();

/// The membership epoch this process is in: 0 after init(), one more per
/// reset; -1 when the runtime is not initialized.
int64_t epoch();

/// Elastic jobs (troupe-run --min-np / --host-discovery-script): troupe-run
/// plans every membership epoch, reset() joins the newest plan (waiting for
/// it up to TROUPE_ELASTIC_TIMEOUT + TROUPE_RESET_TIMEOUT), and a process
/// the plan has no place for gets status_code::removed from init() or
/// reset() and should exit 0. The torch, HOROVOD_* and TROUPE_* identity
/// variables are not rewritten here (the Python layer does it).
///
/// hosts_updated(): the change of hosts troupe-run announced while this
/// epoch ran (one store round trip); host_update::none outside elastic jobs.
/// Ranks may read it at slightly different moments: agree with a collective
/// before acting on it (troupe.torch.elastic does).
host_update hosts_updated();

/// Elastic jobs: whether the current epoch has a member that never served
/// before, so state must be synced to it. Every member computes the same
/// answer from the store. False outside elastic jobs.
bool epoch_has_newcomers();

/// Timeline at run time (Horovod's start_timeline / stop_timeline): from now
/// on this rank writes a Chrome trace to `path` ("t.json" -> "t.<rank>.json",
/// truncated), with a CYCLE_START marker per negotiation cycle when
/// `mark_cycles`. Needs TROUPE_TIMELINE (or HOROVOD_TIMELINE) set, to
/// DYNAMIC or to a file; fails with invalid_argument otherwise.
status start_timeline(const std::string& path, bool mark_cycles = false);
/// Stops writing; the file stays a complete JSON document.
status stop_timeline();

/// Identity. Each returns -1 when the runtime is not initialized.
int rank();
int size();
int local_rank();
int local_size();
int cross_rank();
int cross_size();

/// Whether this job's CPU collectives run on MPI / on Gloo (Horovod's
/// mpi_enabled() / gloo_enabled()): the library TROUPE_CPU_OPERATIONS asks
/// for, else Gloo under troupe-run and MPI under mpirun or in a process
/// started alone. False when the runtime is not initialized or the library
/// is not built.
bool mpi_enabled();
bool gloo_enabled();

/// Horovod's mpi_threads_supported(): 1 when MPI runs with
/// MPI_THREAD_MULTIPLE, 0 with MPI_THREAD_SERIALIZED
/// (TROUPE_MPI_THREADS_DISABLE=1); a process started alone, which does not
/// start MPI, gets what Troupe would ask MPI for. -1 when MPI is not
/// enabled.
int mpi_threads_supported();

/// Reduces `input` across ranks into `output`, which may be the same memory.
/// Both must have the same dtype and shape on every rank. The input is
/// multiplied by `prescale_factor` before and the result by
/// `postscale_factor` after the reduction (AVERAGE = SUM / size). float16 and
/// bfloat16 travel as 16 bits; each step adds in float32 and rounds its
/// partial result to 16 bits, as NCCL and Horovod's MPI float16 op do
/// (Adasum computes in float32). bool: sum is logical or, product and min
/// logical and; no average or scaling. Adasum (floating point, power-of-two
/// number of ranks) follows Horovod's CPU algorithm.
handle allreduce(const tensor& input, const tensor& output, const std::string& name,
                 reduce_op op = reduce_op::sum, double prescale_factor = 1.0,
                 double postscale_factor = 1.0, const process_set& set = {});

/// Reduces (SUM or AVERAGE) `input` across ranks and leaves each rank a
/// block of rows: with R rows and N ranks, ranks 0 .. R % N - 1 get
/// R / N + 1 rows, the others R / N (Horovod's rule). The result is in
/// handle::output() / handle::output_shape(), or in memory from `allocate`
/// when given (see output_allocator; output() then stays empty).
handle reducescatter(const tensor& input, const std::string& name,
                     reduce_op op = reduce_op::sum, double prescale_factor = 1.0,
                     double postscale_factor = 1.0, const process_set& set = {},
                     const output_allocator& allocate = {});

/// Sends rows of `input` to every rank: `splits[r]` rows to rank r, in
/// order (empty = equal split, which needs rows % size == 0). Trailing
/// dimensions must agree across ranks. The received rows, concatenated in
/// rank order, are in handle::output() (or in memory from `allocate`);
/// handle::received_splits() tells how many came from each rank.
handle alltoall(const tensor& input, const std::string& name,
                const std::vector<int64_t>& splits = {}, const process_set& set = {},
                const output_allocator& allocate = {});

/// Completes once every rank has called it.
handle barrier(const process_set& set = {});

/// This rank has no more collectives for now (uneven data): until every
/// rank has joined, it contributes zeros to the others' allreduces (AVERAGE
/// still divides by the full size), and allgather / alltoall / broadcast /
/// reducescatter / barrier fail with Horovod's "not supported with Join"
/// errors. Completes on every rank once all have joined; join_result()
/// then gives the rank that joined last.
handle join(const process_set& set = {});
int join_result(const handle& join_handle);

/// Grouped collectives: the members (named "<name>.<i>") are accepted or
/// rejected together, negotiated together, and released to the backend in
/// one batch once every member is ready on every rank. One handle per member.
std::vector<handle> grouped_allreduce(const std::vector<tensor>& inputs,
                                      const std::vector<tensor>& outputs,
                                      const std::string& name, reduce_op op = reduce_op::sum,
                                      double prescale_factor = 1.0,
                                      double postscale_factor = 1.0,
                                      const process_set& set = {});
/// `allocators`: none, or one per input (a different count fails the group).
std::vector<handle> grouped_allgather(const std::vector<tensor>& inputs,
                                      const std::string& name, const process_set& set = {},
                                      const std::vector<output_allocator>& allocators = {});
std::vector<handle> grouped_reducescatter(const std::vector<tensor>& inputs,
                                          const std::string& name,
                                          reduce_op op = reduce_op::sum,
                                          double prescale_factor = 1.0,
                                          double postscale_factor = 1.0,
                                          const process_set& set = {},
                                          const std::vector<output_allocator>& allocators = {});

/// Concatenates every rank's `input` along the first dimension, in rank
/// order. The first dimension may differ per rank; the others must agree.
/// The result is in handle::output() / handle::output_shape(), or in memory
/// from `allocate` when given.
handle allgather(const tensor& input, const std::string& name, const process_set& set = {},
                 const output_allocator& allocate = {});

/// Copies `root_rank`'s tensor into `tensor` on every other rank of the
/// set; `root_rank` is a global rank.
handle broadcast(const tensor& tensor, int root_rank, const std::string& name,
                 const process_set& set = {});

/// Process sets (Horovod's contract): every rank calls these in the same
/// order, members or not; each call returns once every rank has done it.
/// Needs TROUPE_DYNAMIC_PROCESS_SETS=1 (static sets: init(process_sets)).
/// A new set takes the oldest freed id, else the next one. Collectives
/// pending on a removed set fail. A rank that does not make the same call
/// within TROUPE_START_TIMEOUT of the first fails it on every rank (its own
/// late call included), with an error naming it. Other threads' calls
/// (rank(), collectives, shutdown()) do not wait behind these.
status add_process_set(const std::vector<int>& ranks, process_set& out);
status remove_process_set(const process_set& set);

/// Id 0, every rank.
process_set global_process_set();

/// Changes settings of `set` (fusion threshold, cycle time, cache capacity,
/// fusion chunk) while the job runs; this rank must be a member. Any member
/// may call it alone: the change goes to the set's coordinator, which
/// applies it before its next response list, so every member switches at
/// the same point. The call returns once the change is on its way. The
/// autotuner leaves what it sets alone; the global set's settings stay in
/// force over reset() (other sets end with their epoch; docs/autotune.md).
status tune(const tuning& change, const process_set& set = {});

} // namespace troupe
