#include "workers/descriptor_limit.hpp"

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>
#include <sys/resource.h>

namespace troupe::workers {

void raise_descriptor_limit(int size) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return;
  if (limit.rlim_cur < limit.rlim_max) {
    const auto before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      spdlog::warn("troupe: cannot raise the open-descriptor limit from {} to {}: {}", before,
                   limit.rlim_max, std::strerror(errno));
      limit.rlim_cur = before;
    }
  }
  // A control and a Gloo connection per peer, a second set's mesh, and
  // room for the program's own files.
  const rlim_t needed = 4 * static_cast<rlim_t>(size) + 256;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed)
    spdlog::warn("troupe: the open-descriptor limit is {}, below the ~{} a process of a {}-rank job may "
                 "need (raise it with ulimit -n)",
                 limit.rlim_cur, needed, size);
}

} // namespace troupe::workers
