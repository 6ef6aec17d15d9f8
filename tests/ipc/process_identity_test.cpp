#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc/process_alive.hpp"

namespace troupe::ipc {
namespace {

TEST(process_start_time, names_a_process_until_it_is_gone) {
  const auto mine = process_start_time(::getpid());
  ASSERT_TRUE(mine);
  const pid_t child = ::fork();
  if (child < 0)
    std::abort();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const auto its = process_start_time(child);
  ASSERT_TRUE(its);
  EXPECT_GE(*its, *mine);  // started after this process
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // Gone: no start time, or a later process's under a reused pid.
  EXPECT_NE(process_start_time(child), its);
}

TEST(pid_namespace, names_the_boot_and_the_namespace) {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  ASSERT_TRUE(std::getline(boot, id));
  struct stat ns {};
  ASSERT_EQ(::stat("/proc/self/ns/pid", &ns), 0);
  EXPECT_EQ(pid_namespace(),
            id + ":" + std::to_string(ns.st_dev) + ":" + std::to_string(ns.st_ino));
}

} // namespace
} // namespace troupe::ipc
