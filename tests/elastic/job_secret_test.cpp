#include "elastic/job_secret.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <unistd.h>

namespace troupe::elastic {
namespace {

// A pipe holding `text`, then EOF; returns its read end.
int pipe_with(const std::string& text) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  EXPECT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  return fds[0];
}

TEST(job_secret, troupe_runs_descriptor_reads_the_same_twice) {
  const auto secret = random_secret();
  const int fd = secret_descriptor(secret);
  EXPECT_EQ(read_secret_descriptor(std::to_string(fd)), secret);
  EXPECT_EQ(read_secret_descriptor(std::to_string(fd)), secret);  // init() after shutdown()
  ::close(fd);
}

// A worker started over ssh reads the secret from ssh's stdin: the pipe is
// read to EOF once and replaced by a copy a later init() reads again.
TEST(job_secret, a_pipe_is_read_to_eof_and_kept) {
  const auto secret = random_secret();
  const int fd = pipe_with(secret);
  EXPECT_EQ(read_secret_descriptor(std::to_string(fd)), secret);
  EXPECT_EQ(read_secret_descriptor(std::to_string(fd)), secret);
  ::close(fd);
}

TEST(job_secret, a_short_pipe_is_refused_naming_the_variable) {
  const int fd = pipe_with("short");
  try {
    read_secret_descriptor(std::to_string(fd));
    FAIL() << "a 5-byte secret was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("TROUPE_SECRET_FD"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("holds 5 bytes"), std::string::npos) << e.what();
  }
  ::close(fd);
}

} // namespace
} // namespace troupe::elastic
