#include <sys/resource.h>
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
#include "ipc/shm_segment.hpp"

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

// The shared positions are the stream's first 8 bytes (what was written)
// and then one 64-byte slot per reader (what it read).
uint64_t& shared_written(std::vector<char>& memory) {
  return *reinterpret_cast<uint64_t*>(memory.data());
}
uint64_t& shared_read(std::vector<char>& memory, size_t reader) {
  return *reinterpret_cast<uint64_t*>(memory.data() + 64 + 64 * reader);
}

TEST(byte_stream, a_forged_write_position_is_an_error_not_a_read_past_the_stream) {
  constexpr size_t capacity = 64;
  std::vector<char> memory(byte_stream::bytes_needed(1, capacity), 0);
  byte_stream writer_view(memory.data(), 1, capacity);
  byte_stream reader_view(memory.data(), 1, capacity);
  writer_view.set_active(0, true);
  message_writer writer;
  writer.push("first");
  ASSERT_TRUE(writer.flush(writer_view));
  shared_written(memory) += uint64_t{1} << 40;  // another process wrote there
  message_reader reader;
  std::vector<std::string> got;
  try {
    reader.drain(reader_view, 0, [&](std::string m) { got.push_back(std::move(m)); });
    FAIL() << "read " << got.size() << " messages from a stream claiming 2^40 bytes";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt control stream: 1099511627785 bytes unread"),
              std::string::npos)
      << e.what();
  }
  // The writer kept its own position: its next write puts it back.
  writer.push("second");
  ASSERT_TRUE(writer.flush(writer_view));
  message_reader fresh;
  fresh.drain(reader_view, 0, [&](std::string m) { got.push_back(std::move(m)); });
  EXPECT_EQ(got, (std::vector<std::string>{"first", "second"}));
}

TEST(byte_stream, a_forged_read_position_holds_nothing_back_and_overwrites_nothing_unread) {
  constexpr size_t capacity = 64;
  std::vector<char> memory(byte_stream::bytes_needed(2, capacity), 0);
  byte_stream stream(memory.data(), 2, capacity);
  stream.set_active(0, true);
  stream.set_active(1, true);
  // Reader 1 claims to be far ahead of the writer, then never reads.
  shared_read(memory, 1) = uint64_t{1} << 50;
  message_writer writer;
  message_reader reader;
  std::vector<std::string> sent, got;
  for (int i = 0; i < 200; ++i) {
    sent.push_back(message(0, i, 40));
    writer.push(sent.back());
    bool flushed = writer.flush(stream);
    for (int round = 0; round < 8 && !flushed; ++round) {
      reader.drain(stream, 0, [&](std::string m) { got.push_back(std::move(m)); });
      flushed = writer.flush(stream);
    }
    ASSERT_TRUE(flushed) << "message " << i << " held back";
  }
  reader.drain(stream, 0, [&](std::string m) { got.push_back(std::move(m)); });
  EXPECT_EQ(got, sent);
}

TEST(byte_stream, a_dropped_reader_holds_nothing_back_and_its_next_read_fails) {
  constexpr size_t capacity = 64;
  std::vector<char> memory(byte_stream::bytes_needed(3, capacity), 0);
  byte_stream stream(memory.data(), 3, capacity);
  for (size_t r = 0; r < 3; ++r)
    stream.set_active(r, true);
  EXPECT_TRUE(stream.slowest().empty());  // nothing unread
  ASSERT_EQ(stream.write_some("0123456789", 10), 10u);
  char out[8];
  ASSERT_EQ(stream.read_some(0, out, 8), 8u);
  ASSERT_EQ(stream.read_some(1, out, 4), 4u);
  ASSERT_EQ(stream.read_some(2, out, 4), 4u);
  EXPECT_EQ(stream.slowest(), (std::vector<size_t>{1, 2}));  // 6 unread each
  ASSERT_EQ(stream.read_some(1, out, 8), 6u);
  EXPECT_EQ(stream.slowest(), (std::vector<size_t>{2}));
  stream.drop(2);
  // Reader 2's 10 bytes no longer count: the writer fills what reader 0
  // left (2 bytes unread) up to the capacity.
  std::string fill(capacity, 'x');
  EXPECT_EQ(stream.write_some(fill.data(), fill.size()), capacity - 2);
  EXPECT_THROW(stream.read_some(2, out, 1), std::runtime_error);
}

TEST(byte_stream, an_announced_length_allocates_only_what_arrived) {
  constexpr size_t capacity = 64;
  std::vector<char> memory(byte_stream::bytes_needed(1, capacity), 0);
  byte_stream stream(memory.data(), 1, capacity);
  stream.set_active(0, true);
  const uint32_t gib = message_reader::max_message;
  ASSERT_EQ(stream.write_some(reinterpret_cast<const char*>(&gib), 4), 4u);
  ASSERT_EQ(stream.write_some("12345678", 8), 8u);
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  message_reader reader;
  reader.drain(stream, 0, [](std::string) { FAIL() << "1 GiB announced, 8 bytes written"; });
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  // Resizing to the announced GiB would touch it all (ru_maxrss is in KiB).
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024);
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
  bool wait_for_count(size_t n, std::chrono::milliseconds deadline) {
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

// Whether `got` holds whole messages of message() only, each sender's in
// the order sent: a digest of the sequence then, else 0.
uint64_t digest_if_whole(const std::vector<std::string>& got, int senders) {
  std::vector<int> next(static_cast<size_t>(senders), 0);
  uint64_t digest = 1469598103934665603ull;
  for (const auto& m : got) {
    const auto colon = m.find(':');
    if (colon == std::string::npos)
      return 0;
    const int sender = std::stoi(m.substr(0, colon));
    const int index = std::stoi(m.substr(colon + 1));
    if (sender < 0 || sender >= senders || index != next[static_cast<size_t>(sender)]++ ||
        m != message(sender, index, m.size()))
      return 0;
    for (char c : m.substr(0, m.find(':', colon + 1)))
      digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    digest = (digest ^ '|') * 1099511628211ull;
  }
  return digest == 0 ? 1 : digest;
}

// The coordinator's lists (larger than the stream: written in pieces under
// the lock) and members' agreed lists share the response stream: every
// member reads every message whole, in one and the same order.
TEST(shm_channel, agreed_lists_and_the_coordinators_lists_reach_every_member_whole_in_one_order) {
  constexpr int members = 4;
  constexpr int lists = 300;
  constexpr int agreed = 400;
  const channel_sizes small{4096, 8192, 16};
  channel_host host(members, small);
  inbox ready;
  host.start([&](std::string m) { ready.add(std::move(m)); });
  // Set rank 0 reads in this process, as the coordinator's own rank does.
  auto own = channel_member::open(host.name(), 0);
  ASSERT_TRUE(own);
  inbox own_got;
  own->start([&](std::string m) { own_got.add(std::move(m)); });
  constexpr size_t total = lists + (members - 1) * agreed;
  std::vector<pid_t> children;
  std::vector<int> digests;
  for (int m = 1; m < members; ++m) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      auto end = channel_member::open(host.name(), m);
      if (!end || !end->board())
        ::_exit(2);
      inbox got;
      end->start([&](std::string s) { got.add(std::move(s)); });
      end->send("ready");
      // Every member opens the channel before anything is written there
      // (as they introduce themselves before the first list): the
      // coordinator's first list says when.
      if (!got.wait_for_count(1, 30s))
        ::_exit(6);
      std::vector<std::string> mine;
      std::mt19937 r(static_cast<unsigned>(m));
      for (int i = 0; i < agreed; ++i)
        mine.push_back(message(m, i, 8 + r() % 600));
      if (!send_all(*end, mine, std::chrono::steady_clock::now() + 30s, &channel_member::agree))
        ::_exit(3);
      if (!got.wait_for_count(total, 30s))
        ::_exit(4);
      std::lock_guard<std::mutex> lock(got.mutex);
      const uint64_t digest = digest_if_whole(got.messages, members);
      ::_exit(::write(fds[1], &digest, sizeof digest) == sizeof digest && digest != 0 ? 0 : 5);
    }
    ::close(fds[1]);
    children.push_back(pid);
    digests.push_back(fds[0]);
  }
  ASSERT_TRUE(ready.wait_for_count(members - 1, 30s));
  host.unlink();
  std::vector<std::string> mine;
  std::mt19937 random(5);
  for (int i = 0; i < lists; ++i)
    mine.push_back(message(0, i, 8 + random() % 20000));
  EXPECT_TRUE(send_all(host, mine, std::chrono::steady_clock::now() + 30s, &channel_host::post));
  ASSERT_TRUE(own_got.wait_for_count(total, 30s)) << own_got.messages.size();
  const uint64_t expected = digest_if_whole(own_got.messages, members);
  EXPECT_NE(expected, 0u) << "set rank 0 read a torn or reordered message";
  for (size_t c = 0; c < children.size(); ++c) {
    int status = 0;
    ASSERT_EQ(::waitpid(children[c], &status, 0), children[c]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "member exit " << status;
    uint64_t digest = 0;
    EXPECT_EQ(::read(digests[c], &digest, sizeof digest), static_cast<ssize_t>(sizeof digest));
    EXPECT_EQ(digest, expected) << "set rank " << c + 1 << " read another order";
    ::close(digests[c]);
  }
}

// A member that has read and handled everything runs its own agreed list
// at once: the others read it from the stream, its own reader never does.
TEST(shm_channel, an_agreed_list_written_inline_reaches_the_others_only) {
  channel_host host(3, {4096, 8192, 4});
  auto one = channel_member::open(host.name(), 1);
  auto two = channel_member::open(host.name(), 2);
  ASSERT_TRUE(one && two);
  inbox got_one, got_two;
  one->start([&](std::string m) { got_one.add(std::move(m)); });
  two->start([&](std::string m) { got_two.add(std::move(m)); });
  host.unlink();
  ASSERT_TRUE(host.post("list 0"));
  ASSERT_TRUE(got_one.wait_for_count(1, 10s));
  ASSERT_TRUE(got_two.wait_for_count(1, 10s));
  // Not handled yet (its actor says so): nothing is written.
  EXPECT_FALSE(one->agree_inline("agreed by 1", [] { return false; }));
  EXPECT_TRUE(one->agree_inline("agreed by 1", [] { return true; }));
  ASSERT_TRUE(got_two.wait_for_count(2, 10s));
  ASSERT_TRUE(host.post("list 1"));
  ASSERT_TRUE(got_one.wait_for_count(2, 10s));
  ASSERT_TRUE(got_two.wait_for_count(3, 10s));
  std::lock_guard<std::mutex> a(got_one.mutex), b(got_two.mutex);
  EXPECT_EQ(got_one.messages, (std::vector<std::string>{"list 0", "list 1"}));
  EXPECT_EQ(got_two.messages, (std::vector<std::string>{"list 0", "agreed by 1", "list 1"}));
}

// A member's own thread takes what the stream holds, in order, once its
// actor has handled all its reader passed on; the reader never passes
// those on, and takes what comes after.
TEST(shm_channel, a_member_takes_its_messages_inline_once_its_actor_is_idle) {
  channel_host host(2, {4096, 8192, 4});
  auto member = channel_member::open(host.name(), 1);
  ASSERT_TRUE(member);
  host.unlink();
  EXPECT_TRUE(member->take_inline([] { return true; }).empty());
  ASSERT_TRUE(host.post("list 0"));
  ASSERT_TRUE(host.post("list 1"));
  // Not handled yet (its actor says so): nothing is read.
  EXPECT_TRUE(member->take_inline([] { return false; }).empty());
  EXPECT_TRUE(member->unread());
  EXPECT_EQ(member->take_inline([] { return true; }),
            (std::vector<std::string>{"list 0", "list 1"}));
  EXPECT_FALSE(member->unread());
  // A list longer than the stream: what take_inline read of it, its reader
  // completes.
  const std::string longer(20000, 'x');
  ASSERT_FALSE(host.post(longer));
  EXPECT_TRUE(member->take_inline([] { return true; }).empty());
  inbox got;
  member->start([&](std::string m) { got.add(std::move(m)); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!host.flush() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(host.post("list 2"));
  ASSERT_TRUE(got.wait_for_count(2, 10s));
  std::lock_guard<std::mutex> lock(got.mutex);
  EXPECT_EQ(got.messages, (std::vector<std::string>{longer, "list 2"}));
}

// A member whose actor waits for its messages itself (taking_scope):
// writers do not wake its reader for them, the reader stops polling for a
// reply, and at the scope's end it is woken for what the actor left.
TEST(shm_channel, a_taking_member_reads_alone_and_wakes_its_reader_for_the_rest) {
  channel_host host(2, {4096, 8192, 4});
  auto member = channel_member::open(host.name(), 1);
  ASSERT_TRUE(member);
  host.unlink();
  member->poll_replies(10s);
  inbox got;
  member->start([&](std::string m) { got.add(std::move(m)); });
  std::this_thread::sleep_for(50ms);  // asleep: no reply was due
  member->expect_reply();
  ASSERT_TRUE(host.post("woken"));
  // Read: the reader now polls for the next message, for up to 10 s.
  ASSERT_TRUE(got.wait_for_count(1, 10s));
  {
    const channel_member::taking_scope taking{*member};
    std::this_thread::sleep_for(20ms);  // the reader leaves its poll and sleeps
    ASSERT_TRUE(host.post("taken"));
    std::this_thread::sleep_for(20ms);  // a reader polling or woken would have read it by now
    EXPECT_EQ(member->take_inline([] { return true; }), (std::vector<std::string>{"taken"}));
    ASSERT_TRUE(host.post("left"));
  }
  // Before the reader's idle wake (a second after it went to sleep): the
  // scope's end woke it.
  EXPECT_TRUE(got.wait_for_count(2, 500ms)) << "the reader slept through what was left";
  std::lock_guard<std::mutex> lock(got.mutex);
  EXPECT_EQ(got.messages, (std::vector<std::string>{"woken", "left"}));
}

// A member that polls for its replies (poll_replies) still takes each in
// order: those that come while it polls, those that come after its window
// ended and it went to sleep, and those nobody announced.
TEST(shm_channel, a_polling_member_takes_replies_during_and_after_its_window) {
  channel_host host(2);
  host.start([](std::string) {});
  auto member = channel_member::open(host.name(), 1);
  ASSERT_TRUE(member);
  member->poll_replies(5ms);
  inbox got;
  member->start([&](std::string m) { got.add(std::move(m)); });
  std::vector<std::string> sent;
  std::mt19937 random(5);
  for (int i = 0; i < 60; ++i) {
    const auto kind = random() % 3;
    if (kind != 2)
      member->expect_reply();
    if (kind == 1)
      std::this_thread::sleep_for(8ms);  // past the window: the reader sleeps
    sent.push_back(message(0, i, 1 + random() % 200));
    ASSERT_TRUE(host.post(sent.back()));
    ASSERT_TRUE(got.wait_for_count(sent.size(), 10s)) << "reply " << i << " never arrived";
  }
  std::lock_guard<std::mutex> lock(got.mutex);
  EXPECT_EQ(got.messages, sent);
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

// The header's first fields, laid out as shm_channel.cpp's channel_header.
struct header_prefix {
  uint64_t magic;
  uint32_t members;
  uint64_t request_bytes;
  uint64_t response_bytes;
  uint64_t segment_bytes;
};

TEST(shm_channel, a_member_does_not_trust_a_header_another_process_rewrote) {
  const channel_sizes sizes{4096, 8192};
  channel_host host(3, sizes);
  auto segment = ipc::shm_segment::open(host.name());
  segment.keep_name();
  auto* h = static_cast<header_prefix*>(segment.data());
  ASSERT_EQ(h->request_bytes, 4096u);
  ASSERT_EQ(h->response_bytes, 8192u);
  // Request streams of 0 bytes (every send would divide by zero), the
  // response stream grown by what they gave up: the layout's total is the
  // same.
  h->request_bytes = 0;
  h->response_bytes = 8192 + 3 * 4096;
  EXPECT_EQ(channel_member::open(host.name(), 1), nullptr);
  // A request stream far larger than the segment.
  h->request_bytes = uint64_t{1} << 62;
  h->response_bytes = 8192;
  EXPECT_EQ(channel_member::open(host.name(), 1), nullptr);
  h->request_bytes = 4096;
  h->members = 0xffffffffu;
  EXPECT_EQ(channel_member::open(host.name(), 1), nullptr);
  h->members = 3;
  EXPECT_NE(channel_member::open(host.name(), 1), nullptr);
}

TEST(shm_channel, the_coordinator_can_drop_a_member_that_stopped_reading) {
  channel_host host(3, channel_sizes{4096, 256});
  auto reading = channel_member::open(host.name(), 1);
  auto frozen = channel_member::open(host.name(), 2);  // open, never reads
  ASSERT_NE(reading, nullptr);
  ASSERT_NE(frozen, nullptr);
  inbox got;
  reading->start([&](std::string s) { got.add(std::move(s)); });
  bool blocked = false;
  int posted = 0;
  for (; posted < 50 && !blocked; ++posted)
    blocked = !host.post(message(0, posted, 100));
  ASSERT_TRUE(blocked) << "256 bytes of room took 50 lists of 100 bytes";
  // The reading member drains what was written (the blocked list partly):
  // only the frozen one is behind then.
  ASSERT_TRUE(got.wait_for_count(static_cast<size_t>(posted - 1), 10s));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(host.drop_slowest(), (std::vector<int>{2}));
  // The dropped member, reading at last, is told why nothing more comes.
  inbox frozen_got;
  inbox frozen_broken;
  frozen->start([&](std::string s) { frozen_got.add(std::move(s)); },
                [&](std::string why) { frozen_broken.add(std::move(why)); });
  ASSERT_TRUE(frozen_broken.wait_for_count(1, 10s));
  EXPECT_NE(frozen_broken.messages[0].find("dropped by the writer"), std::string::npos)
    << frozen_broken.messages[0];
  EXPECT_TRUE(send_all(host, {}, std::chrono::steady_clock::now() + 10s, &channel_host::post));
  for (int i = posted; i < 50; ++i)
    EXPECT_TRUE(send_all(host, {message(0, i, 100)}, std::chrono::steady_clock::now() + 10s,
                         &channel_host::post));
  EXPECT_TRUE(got.wait_for_count(50, 10s)) << got.messages.size();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(frozen_broken.messages.size(), 1u);  // said once
  EXPECT_TRUE(frozen_got.messages.empty());
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
