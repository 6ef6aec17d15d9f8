#include "ipc/process_alive.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

namespace troupe::ipc {

namespace {

// The fields of /proc/<pid>/stat after the name (which may hold spaces and
// parentheses), from the state (field 3) on; nullopt when unreadable.
std::optional<std::string> stat_after_name(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return std::nullopt;
  const auto paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size())
    return std::nullopt;
  return line.substr(paren + 2);
}

} // namespace

bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return false;
  const auto fields = stat_after_name(pid);
  if (!fields)
    return true;  // no procfs here: kill() said it exists
  return (*fields)[0] != 'Z' && (*fields)[0] != 'X';
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
  const auto after_name = stat_after_name(pid);
  if (!after_name)
    return std::nullopt;
  std::istringstream fields(*after_name);
  std::string field;
  for (int i = 3; i < 22; ++i)  // to the start time, field 22
    fields >> field;
  uint64_t start = 0;
  if (!(fields >> start))
    return std::nullopt;
  return start;
}

} // namespace troupe::ipc
