#include "bench/raw_peers.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>

#include "backends/gloo/gloo_store.hpp"
#include "elastic/job_secret.hpp"
#include "elastic/embedded_store.hpp"

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
  auto client = std::make_shared<elastic::embedded_store_client>(
    env("TROUPE_STORE_ADDR"), static_cast<uint16_t>(std::stoi(env("TROUPE_STORE_PORT"))),
    *elastic::read_secret_descriptor(env(elastic::secret_fd_variable)),
    std::chrono::seconds(30));
  backends::gloo_store store{client, env("TROUPE_JOB_ID") + "/bench/raw-gloo/",
                             std::chrono::seconds(30)};
  auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);
  return context;
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
