#include "bench/raw_peers.hpp"

#include <cstdlib>
#include <stdexcept>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>

#include "backends/gloo/gloo_store.hpp"
#include "elastic/store.hpp"

namespace troupe::bench {

namespace {

class raw_mpi : public raw_peer {
public:
  raw_mpi() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  }
  ~raw_mpi() override {
    MPI_Comm_free(&comm_);
  }
  void allreduce(float* data, size_t count) override {
    MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_);
  }

private:
  MPI_Comm comm_;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v)
    throw std::runtime_error(std::string(name) + " is not set: run under troupe-run --gloo");
  return v;
}

class raw_gloo : public raw_peer {
public:
  raw_gloo() {
    const int rank = std::stoi(env("TROUPE_RANK")), size = std::stoi(env("TROUPE_SIZE"));
    auto client = std::make_shared<elastic::store_client>(
      env("TROUPE_STORE_ADDR"), static_cast<uint16_t>(std::stoi(env("TROUPE_STORE_PORT"))),
      std::chrono::seconds(30));
    backends::gloo_store store{client, env("TROUPE_JOB_ID") + "/bench/raw-gloo/",
                               std::chrono::seconds(30)};
    auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->connectFullMesh(store, device);
    context_ = std::move(context);
  }
  void allreduce(float* data, size_t count) override {
    gloo::AllreduceOptions o{context_};
    o.setInput(data, count);
    o.setOutput(data, count);
    o.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(o);
  }

private:
  std::shared_ptr<gloo::Context> context_;
};

} // namespace

std::unique_ptr<raw_peer> make_raw_peer(const std::string& backend) {
  if (backend == "mpi")
    return std::make_unique<raw_mpi>();
  return std::make_unique<raw_gloo>();
}

} // namespace troupe::bench
