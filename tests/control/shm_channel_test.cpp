#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "control/byte_stream.hpp"
#include "control/shm_channel.hpp"

namespace troupe::control {
namespace {

using namespace std::chrono_literals;

// A message that says who sent it and in which place, padded to `size`.
std::string message(int sender, int index, size_t size) {
  auto m = std::to_string(sender) + ":" + std::to_string(index) + ":";
  for (size_t i = m.size(); i < size; ++i)
    m.push_back(static_cast<char>('a' + (i * 7 + static_cast<size_t>(index)) % 26));
  return m;
}

TEST(byte_stream, messages_longer_than_the_stream_arrive_whole_and_in_order_at_every_reader) {
  constexpr size_t capacity = 64;
  std::vector<char> memory(byte_stream::bytes_needed(3, capacity), 0);
  byte_stream stream(memory.data(), 3, capacity);
  stream.set_active(0, true);
  stream.set_active(1, true);  // reader 2 never reads and holds nothing back
  message_writer writer;
  std::vector<message_reader> readers(2);
  std::vector<std::vector<std::string>> got(2);
  std::mt19937 random(7);
  std::vector<std::string> sent;
  for (int i = 0; i < 2000; ++i) {
    sent.push_back(message(0, i, random() % 300));
    writer.push(sent.back());
    // The readers take turns, each reading only sometimes: the writer must
    // wait for the slower one.
    for (int round = 0; round < 4 && !writer.flush(stream); ++round)
      for (size_t r = 0; r < 2; ++r)
        if (random() % 2)
          readers[r].drain(stream, r, [&](std::string m) { got[r].push_back(std::move(m)); });
  }
  for (int round = 0; round < 100000 && !(writer.flush(stream) && !stream.has_unread(0) &&
                                           !stream.has_unread(1));
       ++round)
    for (size_t r = 0; r < 2; ++r)
      readers[r].drain(stream, r, [&](std::string m) { got[r].push_back(std::move(m)); });
  EXPECT_EQ(got[0], sent);
  EXPECT_EQ(got[1], sent);
}

TEST(byte_stream, a_corrupt_length_is_an_error_not_an_allocation) {
  constexpr size_t capacity = 64;
  std::vector<char> memory(byte_stream::bytes_needed(1, capacity), 0);
  byte_stream stream(memory.data(), 1, capacity);
  stream.set_active(0, true);
  const uint32_t huge = 0xfffffff0u;
  ASSERT_EQ(stream.write_some(reinterpret_cast<const char*>(&huge), 4), 4u);
  message_reader reader;
  try {
    reader.drain(stream, 0, [](std::string) { FAIL() << "nothing complete was written"; });
    FAIL() << "a corrupt prefix was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("4294967280 bytes"), std::string::npos) << e.what();
  }
}

// Collects what a reader thread delivers; waits with a deadline.
struct inbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> messages;

  void add(std::string m) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(std::move(m));
    changed.notify_all();
  }
  bool wait_for_count(size_t n, std::chrono::seconds deadline) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, deadline, [&] { return messages.size() >= n; });
  }
};

// Sends every message, retrying the queued rest until written or `deadline`.
template <class End>
bool send_all(End& end, const std::vector<std::string>& messages,
              std::chrono::steady_clock::time_point deadline,
              bool (End::*send)(std::string)) {
  for (const auto& m : messages)
    (end.*send)(m);
  while (!end.flush())
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    else
      std::this_thread::sleep_for(50us);
  return true;
}

TEST(shm_channel, members_in_other_processes_exchange_lists_in_order) {
  constexpr int members = 4;  // set rank 0 is the coordinator's own
  constexpr int count = 1500;
  const channel_sizes small{4096, 8192};  // lists larger than the streams go in pieces
  channel_host host(members, small);
  inbox requests;
  host.start([&](std::string m) { requests.add(std::move(m)); });
  std::vector<std::string> responses;
  std::mt19937 random(11);
  for (int i = 0; i < count; ++i)
    responses.push_back(message(0, i, random() % 20000));

  std::vector<pid_t> children;
  for (int m = 1; m < members; ++m) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      auto end = channel_member::open(host.name(), m);
      if (!end)
        ::_exit(2);
      inbox got;
      end->start([&](std::string s) { got.add(std::move(s)); });
      std::vector<std::string> mine;
      std::mt19937 r(static_cast<unsigned>(m));
      for (int i = 0; i < count; ++i)
        mine.push_back(message(m, i, r() % 6000));
      if (!send_all(*end, mine, deadline, &channel_member::send))
        ::_exit(3);
      if (!got.wait_for_count(count, 30s))
        ::_exit(4);
      ::_exit(got.messages == responses ? 0 : 5);
    }
    children.push_back(pid);
  }
  EXPECT_TRUE(requests.wait_for_count((members - 1) * count, 30s))
    << requests.messages.size() << " request lists arrived";
  host.unlink();
  EXPECT_TRUE(send_all(host, responses, std::chrono::steady_clock::now() + 30s,
                       &channel_host::post));
  for (auto pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "member exit " << status;
  }
  // Each member's lists arrive in the order it sent them.
  std::vector<int> next(members, 0);
  for (const auto& m : requests.messages) {
    const int sender = std::stoi(m.substr(0, m.find(':')));
    const int index = std::stoi(m.substr(m.find(':') + 1));
    EXPECT_EQ(index, next[static_cast<size_t>(sender)]++) << "from member " << sender;
  }
}

TEST(shm_channel, a_member_cannot_open_what_is_not_its_channel) {
  channel_host host(3);
  EXPECT_EQ(channel_member::open("/troupe-ctl-does-not-exist", 1), nullptr);
  EXPECT_EQ(channel_member::open(host.name(), 3), nullptr);   // no such set rank
  EXPECT_EQ(channel_member::open(host.name(), -1), nullptr);
  auto early = channel_member::open(host.name(), 1);
  ASSERT_NE(early, nullptr);
  host.post("first list");
  // A member that would start reading in the middle of the stream uses
  // the network instead.
  EXPECT_EQ(channel_member::open(host.name(), 2), nullptr);
}

TEST(shm_channel, a_member_that_went_away_holds_nothing_back) {
  auto host = std::make_unique<channel_host>(3, channel_sizes{4096, 256});
  auto slow = channel_member::open(host->name(), 1);
  auto gone = channel_member::open(host->name(), 2);
  ASSERT_NE(slow, nullptr);
  ASSERT_NE(gone, nullptr);
  inbox got;
  slow->start([&](std::string s) { got.add(std::move(s)); });
  gone.reset();  // never reads: must not block the coordinator's writes
  for (int i = 0; i < 50; ++i)
    EXPECT_TRUE(send_all(*host, {message(0, i, 200)}, std::chrono::steady_clock::now() + 10s,
                         &channel_host::post));
  EXPECT_TRUE(got.wait_for_count(50, 10s));
}

} // namespace
} // namespace troupe::control
