#include "ipc/process_alive.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

namespace troupe::ipc {

bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return true;  // no procfs here: kill() said it exists
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ||
         (line[paren + 2] != 'Z' && line[paren + 2] != 'X');
}

std::string pid_namespace() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  struct stat ns {};
  if (!std::getline(boot, id) || id.empty() || ::stat("/proc/self/ns/pid", &ns) != 0)
    return {};
  return id + ":" + std::to_string(ns.st_dev) + ":" + std::to_string(ns.st_ino);
}

std::optional<uint64_t> process_start_time(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return std::nullopt;
  // The fields after the name (which may hold spaces and parentheses):
  // state is field 3, the start time field 22.
  const auto paren = line.rfind(')');
  if (paren == std::string::npos)
    return std::nullopt;
  std::istringstream fields(line.substr(paren + 1));
  std::string field;
  for (int i = 3; i < 22; ++i)
    fields >> field;
  uint64_t start = 0;
  if (!(fields >> start))
    return std::nullopt;
  return start;
}

} // namespace troupe::ipc
