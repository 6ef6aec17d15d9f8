#include "bench/raw_peers.hpp"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>

#include "backends/gloo/gloo_store.hpp"
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

// Under mpirun there is no troupe-run store: rank 0 makes a directory for a
// gloo FileStore and tells the others its name over MPI.
std::shared_ptr<gloo::Context> connect_through_directory(int rank, int size) {
  char path[4096] = "/tmp/troupe-bench-gloo-XXXXXX";
  if (rank == 0 && !::mkdtemp(path))
    throw std::runtime_error("mkdtemp failed for the raw-gloo rendezvous directory");
  MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  {
    gloo::rendezvous::FileStore store{path};
    auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
    context->connectFullMesh(store, device);
  }
  // Every rank has read every address once all are past this point.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    std::filesystem::remove_all(path);
  return context;
}

std::shared_ptr<gloo::Context> connect_through_job_store(int rank, int size) {
  auto client = std::make_shared<elastic::store_client>(
    env("TROUPE_STORE_ADDR"), static_cast<uint16_t>(std::stoi(env("TROUPE_STORE_PORT"))),
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
  raw_gloo(int rank, int size)
    : context_(launched_by_mpirun() ? connect_through_directory(rank, size)
                                    : connect_through_job_store(rank, size)) {
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

std::vector<std::unique_ptr<contender>> make_raw_peers(int rank, int size) {
  std::vector<std::unique_ptr<contender>> peers;
  if (launched_by_mpirun())
    peers.push_back(std::make_unique<raw_mpi>());
  peers.push_back(std::make_unique<raw_gloo>(rank, size));
  return peers;
}

} // namespace troupe::bench
