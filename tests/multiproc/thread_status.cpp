#include "thread_status.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace troupe::test {

namespace {

// Empty cpus when the thread ended before its status could be read.
thread_status read(const std::string& tid) {
  thread_status t{tid, {}, {}, 0};
  std::ifstream status("/proc/self/task/" + tid + "/status");
  for (std::string line; std::getline(status, line);) {
    const auto value = [&](size_t at) { return line.substr(line.find_first_not_of(" \t", at)); };
    if (line.rfind("Name:", 0) == 0)
      t.name = value(5);
    else if (line.rfind("Cpus_allowed_list:", 0) == 0)
      t.cpus = value(18);
    else if (line.rfind("voluntary_ctxt_switches:", 0) == 0)
      t.switches += std::stol(value(24));
    else if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
      t.switches += std::stol(value(27));
  }
  return t;
}

} // namespace

std::vector<thread_status> thread_statuses() {
  const auto main_tid = std::to_string(::getpid());
  std::vector<thread_status> out{read(main_tid)};
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    if (entry.path().filename() == main_tid)
      continue;
    // A short-lived thread (a connection's, a detached actor's) may end
    // between the listing and the read: it is not one of this process's
    // threads any more.
    if (auto t = read(entry.path().filename()); !t.cpus.empty())
      out.push_back(std::move(t));
  }
  return out;
}

} // namespace troupe::test
