#include "bench/raw_peers.hpp"

#include <sys/sysinfo.h>

#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/types.h>
#include <gloo/context.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>

#include "backends/cpu/arith.hpp"
#include "backends/gloo/mesh_context.hpp"
#include "elastic/job_secret.hpp"
#include "elastic/embedded_store.hpp"
#include "ipc/cpu_affinity.hpp"

namespace troupe::bench {

namespace {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

class raw_mpi : public contender {
public:
  raw_mpi() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Op_create(&sum_halves, 1, &half_sum_);
  }
  ~raw_mpi() override {
    MPI_Op_free(&half_sum_);
    MPI_Comm_free(&comm_);
  }
  std::string label() const override {
    return "raw-mpi";
  }
  void allreduce_all(const std::vector<buffer_view>& buffers) override {
    for (const auto& b : buffers)
      MPI_Allreduce(MPI_IN_PLACE, b.data, static_cast<int>(b.count),
                    b.float16 ? MPI_UINT16_T : MPI_FLOAT, b.float16 ? half_sum_ : MPI_SUM,
                    comm_);
  }

private:
  // MPI has no float16: a user op, as a raw MPI user (and Horovod) writes.
  static void sum_halves(void* in, void* inout, int* len, MPI_Datatype*) {
    static const auto sum = backends::half_reduction_of(data_type::float16, reduce_op::sum);
    sum(inout, in, inout, static_cast<size_t>(*len));
  }

  MPI_Comm comm_;
  MPI_Op half_sum_;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v)
    throw std::runtime_error(std::string(name) + " is not set: run under troupe-run");
  return v;
}

std::shared_ptr<gloo::Context> connect(int rank, int size) {
  elastic::embedded_store_client store{
    env("TROUPE_STORE_ADDR"), static_cast<uint16_t>(std::stoi(env("TROUPE_STORE_PORT"))),
    *elastic::read_secret_descriptor(env(elastic::secret_fd_variable)),
    std::chrono::seconds(30)};
  return backends::connect_full_mesh(store, env("TROUPE_JOB_ID") + "/bench/raw-gloo/", rank,
                                     size, gloo::transport::tcp::CreateDevice("127.0.0.1"),
                                     std::chrono::seconds(30));
}

template <class T>
void set_buffers(gloo::AllreduceOptions& o, T* data, size_t count) {
  o.setInput(data, count);
  o.setOutput(data, count);
  o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
    &gloo::sum<T>));
}

// The calling thread runs on every CPU of the machine (the kernel keeps it
// within its cpuset) until leave(), then where it ran before: a Gloo user's
// process is not bound, and Gloo's TCP transport is several times slower
// bound (docs/benchmarks.md runs (18) and (26)), while troupe-run binds a
// rank whose data goes through the host's shared segment.
class unbound_thread {
public:
  void enter() {
    before_ = ipc::usable_cpu_list();
    std::vector<int> all(static_cast<size_t>(get_nprocs_conf()));
    std::iota(all.begin(), all.end(), 0);
    ipc::run_current_thread_on(all);
  }
  void leave() {
    ipc::run_current_thread_on(before_);
  }

private:
  std::vector<int> before_;
};

class raw_gloo : public contender {
public:
  raw_gloo(int rank, int size) {
    // Gloo's loop thread, started with the context, inherits the mask.
    unbound_.enter();
    context_ = connect(rank, size);
    unbound_.leave();
  }
  std::string label() const override {
    return "raw-gloo";
  }
  void enter() override {
    unbound_.enter();
  }
  void leave() override {
    unbound_.leave();
  }
  void allreduce_all(const std::vector<buffer_view>& buffers) override {
    for (const auto& b : buffers) {
      gloo::AllreduceOptions o{context_};
      if (b.float16)
        set_buffers(o, static_cast<gloo::float16*>(b.data), b.count);
      else
        set_buffers(o, static_cast<float*>(b.data), b.count);
      gloo::allreduce(o);
    }
  }

private:
  unbound_thread unbound_;
  std::shared_ptr<gloo::Context> context_;
};

} // namespace

std::unique_ptr<contender> make_raw_peer(int rank, int size) {
  if (launched_by_mpirun())
    return std::make_unique<raw_mpi>();
  return std::make_unique<raw_gloo>(rank, size);
}

} // namespace troupe::bench
