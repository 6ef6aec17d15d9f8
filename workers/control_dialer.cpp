#include "workers/control_dialer.hpp"

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "workers/control_plane.hpp"

namespace troupe::workers {

namespace {

constexpr auto retry_pause = std::chrono::milliseconds(50);
constexpr auto max_retry_pause = std::chrono::milliseconds(1000);

} // namespace

control_dialer::control_dialer(caf::actor_system& sys, caf::io::middleman_actor connections,
                               int32_t rank, std::vector<control::published_endpoint> endpoints,
                               control::control_links links)
  : sys_(sys), connections_(std::move(connections)), rank_(rank),
    endpoints_(std::move(endpoints)), links_(std::move(links)) {}

status control_dialer::dial(int32_t peer, clock::time_point deadline,
                            caf::actor& directory) const {
  const auto& to = endpoint(peer);
  const auto host = to.host();
  const auto port = to.port();
  auto attempt = [&] {
    return control_plane::connect(
      connections_, sys_, host, port,
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
  };
  auto remote = attempt();
  auto pause = retry_pause;
  while (!remote && clock::now() + pause < deadline) {
    spdlog::warn("troupe rank {}: connecting to rank {} at {} failed ({}); retrying in {} ms",
                 rank_, peer, to.address, sys_.render(remote.error()), pause.count());
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, max_retry_pause);
    remote = attempt();
  }
  if (!remote)
    return {status_code::peer_lost, "cannot connect to rank " + std::to_string(peer) + " at " +
                                      to.address + ": " + sys_.render(remote.error())};
  directory = std::move(*remote);
  return {};
}

status control_dialer::dial_set(const std::vector<int>& members,
                                clock::time_point deadline) const {
  for (auto peer : links_.set_contacts(rank_, members)) {
    caf::actor directory;
    if (auto dialled = dial(peer, deadline, directory); !dialled.ok())
      return dialled;
  }
  return {};
}

} // namespace troupe::workers
