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
    const auto creator = creator_of(name.substr(1));
    ASSERT_TRUE(creator) << name;
    EXPECT_EQ(creator->pid, ::getpid()) << name;
    EXPECT_EQ(creator->pid_namespace, pid_namespace_inode()) << name;
    EXPECT_TRUE(creator->in_this_pid_namespace()) << name;
  }
  EXPECT_NE(pid_namespace_inode(), 0u);  // procfs is there in the tests
  const auto ctl = creator_of("troupe-ctl-12-4026531836-0123456789abcdef");
  ASSERT_TRUE(ctl);
  EXPECT_EQ(ctl->pid, 12);
  EXPECT_EQ(ctl->pid_namespace, 4026531836u);
  const auto plain = creator_of("troupe-4711-0-fedcba9876543210");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->pid, 4711);
  EXPECT_EQ(plain->pid_namespace, 0u);
}

TEST(segment_names, other_names_have_no_creator) {
  for (const char* entry :
       {"troupe-ctl-12-7-0123456789abcde",     // 15 hex digits
        "troupe-ctl-12-7-0123456789abcdeg",    // not hex
        "troupe-ctl--7-0123456789abcdef",      // no pid
        "troupe-ctl-12--0123456789abcdef",     // no namespace
        "troupe-ctl-12-0123456789abcdef",      // neither (the names before namespaces)
        "troupe-CTL-12-7-0123456789abcdef",    // not a kind
        "troupe--12-7-0123456789abcdef",       // an empty kind with its dash
        "troupe-ctl-12345678901-7-0123456789abcdef",  // more digits than a pid
        "troupe-ctl-12-99999999999999999999-0123456789abcdef",  // past 64 bits
        "troupe-ctl12-7-0123456789abcdef",     // no dash after the kind
        "sem.troupe-ctl-12-7-0123456789abcdef", "mpi-ctl-12-7-0123456789abcdef", "troupe-", ""})
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

// A pid that named a process of this namespace which has exited and been
// reaped.
pid_t reaped_pid() {
  const pid_t child = ::fork();
  if (child == 0)
    ::_exit(0);
  int status = 0;
  return child > 0 && ::waitpid(child, &status, 0) == child ? child : -1;
}

// Ranks of one host in other pid namespaces share /dev/shm (containers
// with the host's IPC): their pids say nothing here. A segment named by a
// process of another namespace, with the pid of an exited process of this
// one, is neither its segment nor an orphan.
TEST(segment_names, names_from_another_pid_namespace_are_left_alone) {
  const pid_t gone = reaped_pid();
  ASSERT_GT(gone, 0);
  const auto before = segment_entries();
  const auto elsewhere = "/troupe-data-" + std::to_string(gone) + "-" +
                         std::to_string(pid_namespace_inode() + 1) + "-0123456789abcdef";
  auto theirs = shm_segment::create(elsewhere, 4096);
  ASSERT_TRUE(creator_of(elsewhere.substr(1)));
  EXPECT_FALSE(creator_of(elsewhere.substr(1))->in_this_pid_namespace());

  EXPECT_TRUE(remove_segments_of(gone).empty());
  for (const auto& left : remove_orphaned_segments(before))
    EXPECT_NE(left.name, elsewhere);
  EXPECT_EQ(::access(("/dev/shm" + elsewhere).c_str(), F_OK), 0);
}

} // namespace
} // namespace troupe::ipc
