#include "ipc/process_alive.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
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
  return id + ":" + std::to_string(ns.st_ino);
}

} // namespace troupe::ipc
