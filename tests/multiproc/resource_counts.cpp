#include "resource_counts.hpp"

#include <chrono>
#include <filesystem>
#include <thread>

namespace troupe::test {

resource_counts count_resources() {
  namespace fs = std::filesystem;
  resource_counts out;
  for (const auto& t : fs::directory_iterator("/proc/self/task")) {
    (void)t;
    ++out.threads;
  }
  for (const auto& fd : fs::directory_iterator("/proc/self/fd")) {
    ++out.fds;
    std::error_code ec;
    if (fs::read_symlink(fd.path(), ec).string().rfind("socket:", 0) == 0)
      ++out.sockets;
  }
  return out;
}

resource_counts settled_resources() {
  auto last = count_resources();
  for (int i = 0, same = 0; i < 50 && same < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto now = count_resources();
    same = now == last ? same + 1 : 0;
    last = now;
  }
  return last;
}

resource_counts back_within(const resource_counts& before, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  auto now = settled_resources();
  while (!now.within(before) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    now = count_resources();
  }
  return now;
}

} // namespace troupe::test
