#pragma once

#include <cstdint>
#include <string>

#include "backends/rank_layout.hpp"
#include "workers/config.hpp"

namespace troupe::workers {

/// Who this process is in the job, as the launcher (troupe-run) said in the
/// environment. Without a launcher: a job of one rank.
struct identity : backends::rank_layout {
  std::string hostname = "127.0.0.1";  // where peers reach this rank
  std::string store_host;
  uint16_t store_port = 0;
  std::string job_id = "local";

  bool has_store() const {
    return store_port != 0;
  }
};

/// Reads TROUPE_RANK / TROUPE_SIZE / ... (HOROVOD_* as aliases). Throws
/// config_error naming the variable when a value is malformed or when a
/// multi-rank job has no rendezvous store address.
identity identity_from_env(const env_lookup& lookup);

} // namespace troupe::workers
