#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace gloo {
class Context;
namespace transport {
class Device;
}
} // namespace gloo

namespace troupe::elastic {
class store_client;
}

namespace troupe::backends {

/// A Gloo context of rank `rank` of `size`, every pair connected, its
/// addresses exchanged through the store under `prefix` with
/// elastic::all_to_all: each rank reads only the addresses meant for it.
/// Gloo's own connectFullMesh has every rank publish all its pairs'
/// addresses in one value and read every peer's, O(N^3) bytes through the
/// store for the job. `timeout` bounds the exchange and Gloo's operations.
std::shared_ptr<gloo::Context> connect_full_mesh(elastic::store_client& store,
                                                 const std::string& prefix, int rank, int size,
                                                 std::shared_ptr<gloo::transport::Device> device,
                                                 std::chrono::milliseconds timeout);

} // namespace troupe::backends
