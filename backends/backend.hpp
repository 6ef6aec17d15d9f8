#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "troupe/types.hpp"

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
  std::shared_ptr<elastic::store_client> store;  // rendezvous, when size > 1
  std::string store_prefix;  // keys of this set's rendezvous
  std::vector<int> world_ranks;  // the set's global ranks; empty = every rank
  int communicator_tag = 0;      // unique among sets created concurrently
  std::chrono::milliseconds timeout{30000};  // per operation
};

struct allreduce_options {
  void* data = nullptr;  // reduced in place
  size_t count = 0;      // elements
  data_type dtype = data_type::float32;
  reduce_op op = reduce_op::sum;
};

struct allgather_options {
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<size_t> counts;  // elements contributed by each rank
  data_type dtype = data_type::float32;
};

struct broadcast_options {
  void* data = nullptr;
  size_t count = 0;
  data_type dtype = data_type::float32;
  int root = 0;
};

/// Bytes to and from each rank; the sums are the buffers' sizes.
struct alltoall_options {
  const void* input = nullptr;
  std::vector<int64_t> send_bytes;
  void* output = nullptr;
  std::vector<int64_t> recv_bytes;
};

/// A communication library driven by one detached backend actor. Every call
/// blocks until done and throws backend_error on failure.
class backend {
public:
  virtual ~backend() = default;

  virtual const char* name() const = 0;

  /// Builds the communicator (rendezvous with the other members).
  virtual void connect() = 0;

  virtual void allreduce(const allreduce_options& opts) = 0;
  virtual void allgather(const allgather_options& opts) = 0;
  virtual void broadcast(const broadcast_options& opts) = 0;
  virtual void alltoall(const alltoall_options& opts) = 0;
  virtual void barrier() = 0;

  /// Sends `send_bytes` to `peer` while receiving `recv_bytes` from it
  /// (pairwise exchange, the building block of Adasum).
  virtual void sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                        int peer) = 0;
};

} // namespace troupe::backends
