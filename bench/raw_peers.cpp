#include "bench/raw_peers.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/context.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>

#include "backends/gloo/mesh_context.hpp"
#include "elastic/job_secret.hpp"
#include "elastic/store.hpp"

namespace troupe::bench {

namespace {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

class raw_mpi : public contender {
public:
  raw_mpi() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  }
  ~raw_mpi() override {
    MPI_Comm_free(&comm_);
  }
  std::string label() const override {
    return "raw-mpi";
  }
  void allreduce_all(const std::vector<buffer_view>& buffers) override {
    for (const auto& b : buffers)
      MPI_Allreduce(MPI_IN_PLACE, b.data, static_cast<int>(b.count), MPI_FLOAT, MPI_SUM, comm_);
  }

private:
  MPI_Comm comm_;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v)
    throw std::runtime_error(std::string(name) + " is not set: run under troupe-run");
  return v;
}

std::shared_ptr<gloo::Context> connect(int rank, int size) {
  elastic::store_client store{
    env("TROUPE_STORE_ADDR"), static_cast<uint16_t>(std::stoi(env("TROUPE_STORE_PORT"))),
    *elastic::read_secret_descriptor(env(elastic::secret_fd_variable)),
    std::chrono::seconds(30)};
  return backends::connect_full_mesh(store, env("TROUPE_JOB_ID") + "/bench/raw-gloo/", rank,
                                     size, gloo::transport::tcp::CreateDevice("127.0.0.1"),
                                     std::chrono::seconds(30));
}

class raw_gloo : public contender {
public:
  raw_gloo(int rank, int size) : context_(connect(rank, size)) {
  }
  std::string label() const override {
    return "raw-gloo";
  }
  void allreduce_all(const std::vector<buffer_view>& buffers) override {
    for (const auto& b : buffers) {
      gloo::AllreduceOptions o{context_};
      o.setInput(b.data, b.count);
      o.setOutput(b.data, b.count);
      o.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(o);
    }
  }

private:
  std::shared_ptr<gloo::Context> context_;
};

} // namespace

std::unique_ptr<contender> make_raw_peer(int rank, int size) {
  if (launched_by_mpirun())
    return std::make_unique<raw_mpi>();
  return std::make_unique<raw_gloo>(rank, size);
}

} // namespace troupe::bench
