#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "ipc/shm_segment.hpp"

namespace troupe::ipc {
namespace {

TEST(segment_names, the_creator_is_read_back_from_every_kind_of_name) {
  for (const std::string kind : {"ctl-", "data-", ""}) {
    const auto name = fresh_segment_name(kind);
    ASSERT_EQ(name[0], '/');
    EXPECT_EQ(creator_of(name.substr(1)), ::getpid()) << name;
  }
  EXPECT_EQ(creator_of("troupe-ctl-12-0123456789abcdef"), 12);
  EXPECT_EQ(creator_of("troupe-4711-fedcba9876543210"), 4711);
}

TEST(segment_names, other_names_have_no_creator) {
  for (const char* entry :
       {"troupe-ctl-12-0123456789abcde",     // 15 hex digits
        "troupe-ctl-12-0123456789abcdeg",    // not hex
        "troupe-ctl--0123456789abcdef",      // no pid
        "troupe-CTL-12-0123456789abcdef",    // not a kind
        "troupe--12-0123456789abcdef",       // an empty kind with its dash
        "troupe-ctl-12345678901-0123456789abcdef",  // more digits than a pid
        "troupe-ctl12-0123456789abcdef",     // no dash after the kind
        "sem.troupe-ctl-12-0123456789abcdef", "mpi-ctl-12-0123456789abcdef", "troupe-", ""})
    EXPECT_FALSE(creator_of(entry)) << entry;
}

// A child that creates a segment of `kind` and dies of SIGKILL without
// unlinking it, as a rank killed before its peers opened the segment: its
// pid and the segment's name (empty if it told none). Not waited for.
std::pair<pid_t, std::string> dead_creator(const std::string& kind) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0)
    return {-1, {}};
  const pid_t child = ::fork();
  if (child == 0) {
    auto s = shm_segment::create(fresh_segment_name(kind), 4096);
    const auto& name = s.name();
    (void)!::write(pipe_fds[1], name.data(), name.size());
    ::raise(SIGKILL);
  }
  ::close(pipe_fds[1]);
  char buf[128] = {};
  const auto n = child > 0 ? ::read(pipe_fds[0], buf, sizeof buf - 1) : 0;
  ::close(pipe_fds[0]);
  return {child, n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string()};
}

TEST(segment_names, a_dead_creators_names_are_removed_and_no_one_elses) {
  const auto [child, name] = dead_creator("ctl-");
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(name.empty());
  auto mine = shm_segment::create(fresh_segment_name("ctl-"), 4096);  // a live creator's

  EXPECT_EQ(remove_segments_of(child), std::vector<std::string>{name});
  EXPECT_THROW(shm_segment::open(name), std::runtime_error);  // gone
  EXPECT_TRUE(remove_segments_of(child).empty());
  EXPECT_NO_THROW(shm_segment::open(mine.name()));  // untouched
}

TEST(segment_names, names_that_appeared_with_a_dead_creator_are_orphans) {
  const auto before = segment_entries();
  const auto [child, name] = dead_creator("data-");
  ASSERT_GT(child, 0);
  ASSERT_FALSE(name.empty());
  auto mine = shm_segment::create(fresh_segment_name("ctl-"), 4096);  // a live creator's
  auto known = segment_entries();  // as if they had been there before
  EXPECT_NE(std::find(known.begin(), known.end(), name.substr(1)), known.end());

  // Dead, not reaped yet: a zombie has exited too.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  auto removed = remove_orphaned_segments(known);
  EXPECT_TRUE(removed.empty());  // every name was there before
  EXPECT_EQ(::access(("/dev/shm" + name).c_str(), F_OK), 0);
  removed = remove_orphaned_segments(before);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].name, name);
  EXPECT_EQ(removed[0].creator, child);
  EXPECT_NE(::access(("/dev/shm" + name).c_str(), F_OK), 0);
  EXPECT_EQ(::access(("/dev/shm" + mine.name()).c_str(), F_OK), 0);  // its creator lives
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
}

} // namespace
} // namespace troupe::ipc
