#pragma once

// What the backend actor drives: one per device kind of a process set.

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/tensor_entry.hpp"
#include "troupe/status.hpp"

namespace troupe::elastic {
class store_client;
}

namespace troupe::backends {

/// A backend call failed. The communicator is unusable afterwards.
class backend_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What a backend needs to build its communicator for one process set.
struct backend_context {
  int rank = 0;  // within the set
  int size = 1;
  std::string advertise_host;  // address peers reach this rank at
  /// The launcher's name of this rank's host: Gloo-mode ranks with the same
  /// one reduce through shared memory (shm/shm_communicator.hpp) unless
  /// `shared_memory` is off.
  std::string host;
  bool shared_memory = true;
  /// troupe-run bound each rank of this host to a CPU of its own
  /// (identity::own_core): waits for the host's other ranks may poll.
  bool own_core = false;
  /// The job's ranks on this rank's host (identity::local_size): with
  /// own_core, whether a wait may poll (ranks_have_cores).
  int host_ranks = 1;
  std::shared_ptr<elastic::store_client> store;  // rendezvous, when size > 1
  std::string store_prefix;  // this set's keys; each backend adds its name ("gloo/")
  std::vector<int> world_ranks;  // the set's global ranks; empty = every rank
  int communicator_tag = 0;      // unique among sets created concurrently
  std::chrono::milliseconds timeout{30000};  // per operation
  /// CPU: see backends/cpu run_context; -1 = the backend's default.
  int64_t fusion_chunk_bytes = -1;
  /// MPI: bytes one MPI_Sendrecv of an exchange (Adasum's) moves at most.
  int64_t mpi_sendrecv_chunk_bytes = int64_t{1} << 30;
  /// NCCL: allreduces / allgathers in two levels, on each host and across
  /// hosts, where the set's hosts allow it (backends/host_layout.hpp).
  bool hierarchical_allreduce = false;
  bool hierarchical_allgather = false;
};

/// A collective a backend has started (c10d's Work): finished once the
/// device and the library have let go of every buffer of the work, and only
/// then, so its handles may complete and the caller free its memory.
class completion {
public:
  virtual ~completion() = default;

  /// Never blocks: the result once finished, nothing while running.
  virtual std::optional<status> poll() = 0;
};

/// The completion of a work that ran to its end before start() returned.
class finished : public completion {
public:
  explicit finished(status result) : result_(std::move(result)) {
  }
  std::optional<status> poll() override {
    return result_;
  }

private:
  status result_;
};

/// Runs negotiated collectives of one device kind for one process set,
/// driven by its backend actor (backend_actor.hpp). Everything behind the
/// negotiation is its own: copies into and out of its fusion buffer,
/// scaling, widening of 16-bit floats, the communication library, so a GPU
/// backend can do them in kernels on its own stream.
class backend {
public:
  virtual ~backend() = default;

  virtual const char* name() const = 0;

  /// Builds the communicator (rendezvous with the other members). Throws
  /// backend_error.
  virtual void connect() = 0;

  /// Starts `work` (a negotiated response and the local entries it covers),
  /// which the caller keeps alive until the completion has finished. Never
  /// throws: a failure is a finished completion holding the error.
  virtual std::unique_ptr<completion> start(actors::collective_work& work) = 0;

  /// Whether every wait of `work`'s run ends by itself (at the library's
  /// timeout, when a member's process exits, or at abort()), so that a
  /// caller nobody can interrupt from its own mailbox may run it
  /// (backend_ref::run_here). Asked once connected.
  virtual bool waits_end(const actors::collective_work& work) const {
    (void)work;
    return false;
  }

  /// A peer is lost (frozen, unreachable): makes the works still running
  /// finish, with an error, as soon as the library can let go of their
  /// buffers. Called from a thread of its own, also while start() blocks
  /// in a library on the backend's thread, and possibly more than once.
  virtual void abort() = 0;
};

} // namespace troupe::backends
