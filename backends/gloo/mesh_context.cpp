#include "backends/gloo/mesh_context.hpp"

#include <vector>

#include <gloo/context.h>
#include <gloo/transport/address.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>

#include "elastic/store_exchange.hpp"

namespace troupe::backends {

namespace {

// gloo::Context keeps its device and transport context protected; a
// rendezvous of our own sets them as gloo::rendezvous::Context does.
class mesh_context : public gloo::Context {
public:
  using gloo::Context::Context;

  void connect(elastic::store_client& store, const std::string& prefix,
               std::shared_ptr<gloo::transport::Device> device) {
    auto transport = device->createContext(rank, size);
    transport->setTimeout(getTimeout());
    std::vector<std::string> to_peer(static_cast<size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank)
        continue;
      auto bytes = transport->createPair(peer)->address().bytes();
      to_peer[peer].assign(bytes.begin(), bytes.end());
    }
    auto from_peer = elastic::all_to_all(store, prefix, rank, size, to_peer, getTimeout());
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank)
        transport->getPair(peer)->connect({from_peer[peer].begin(), from_peer[peer].end()});
    device_ = std::move(device);
    transportContext_ = std::move(transport);
  }
};

} // namespace

std::shared_ptr<gloo::Context> connect_full_mesh(elastic::store_client& store,
                                                 const std::string& prefix, int rank, int size,
                                                 std::shared_ptr<gloo::transport::Device> device,
                                                 std::chrono::milliseconds timeout) {
  auto context = std::make_shared<mesh_context>(rank, size);
  context->setTimeout(timeout);
  context->connect(store, prefix, std::move(device));
  return context;
}

} // namespace troupe::backends
