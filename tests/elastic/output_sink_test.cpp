#include "elastic/launcher/output_sink.hpp"

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

using troupe::elastic::launcher::output_sink;
using namespace std::chrono_literals;

namespace {

// A pipe of one page, filled: its reader has stopped reading.
struct stalled_pipe {
  int fds[2] = {-1, -1};

  stalled_pipe() {
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    ::fcntl(fds[1], F_SETPIPE_SZ, 4096);
    const int size = ::fcntl(fds[1], F_GETPIPE_SZ);
    const std::string fill(static_cast<size_t>(size), 'x');
    EXPECT_EQ(::write(fds[1], fill.data(), fill.size()), static_cast<ssize_t>(fill.size()));
  }
  ~stalled_pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  // Everything that arrives until the writer is quiet for 300 ms.
  std::string drain() const {
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    std::string got;
    auto quiet_since = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - quiet_since < 300ms) {
      char buf[4096];
      const auto n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<size_t>(n));
        quiet_since = std::chrono::steady_clock::now();
      } else {
        std::this_thread::sleep_for(5ms);
      }
    }
    return got;
  }
};

std::string line(int i) {
  return "line " + std::to_string(i) + " " + std::string(80, '.') + "\n";
}

} // namespace

TEST(output_sink, a_reader_that_stopped_never_blocks_the_writer_and_the_gap_is_said_in_place) {
  stalled_pipe pipe;
  output_sink sink{pipe.fds[1], 1024};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i)
    sink.write(line(i));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_GT(sink.dropped(), 50u);
  auto got = pipe.drain();
  sink.write(line(100));
  got += pipe.drain();
  got = got.substr(got.find_first_not_of('x'));
  // Lines in order, and each gap said in place with its size: one gap, or
  // two where the writer thread took line 0 only while lines were being
  // dropped (room for one more line, then drops again).
  std::istringstream in{got};
  std::string text;
  int expected = 0;
  size_t notices = 0, said = 0;
  while (std::getline(in, text)) {
    size_t count = 0;
    if (std::sscanf(text.c_str(), "troupe-run: dropped %zu line(s) of output here", &count) == 1) {
      ++notices;
      said += count;
      expected += static_cast<int>(count);
      continue;
    }
    ASSERT_EQ(text + "\n", line(expected)) << got;
    ++expected;
  }
  EXPECT_EQ(expected, 101) << got;  // line 100 came last
  EXPECT_GE(notices, 1u) << got;
  EXPECT_EQ(said, sink.dropped()) << got;
}

TEST(output_sink, its_end_waits_a_bounded_time_for_a_reader_that_never_reads) {
  stalled_pipe pipe;
  const auto start = std::chrono::steady_clock::now();
  {
    output_sink sink{pipe.fds[1], 1024};
    sink.write(line(0));
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, output_sink::drain_time - 100ms);
  EXPECT_LT(took, output_sink::drain_time + 2s);
}
