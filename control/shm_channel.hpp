#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/arrival_board.hpp"
#include "control/byte_stream.hpp"

// No CAF here: the coordinator and the negotiators own these and turn what
// arrives into messages to themselves.
namespace troupe::control {

/// Called on the channel's reader thread with each message, in order.
using deliver_fn = std::function<void(std::string)>;

struct channel_sizes {
  /// Bytes in flight from one member to the coordinator.
  size_t request_bytes = size_t{256} << 10;
  /// Bytes in flight from the coordinator to the members (one stream all
  /// of them read).
  size_t response_bytes = size_t{4} << 20;
  /// Words of the arrival board (one per cache id; 0 = no board).
  size_t arrival_words = 0;
};

class channel_segment;
class bell_reader;
struct reply_watch;

/// Writes whole messages into the response stream, which the coordinator
/// and (for agreed lists) every member write: under the segment's lock,
/// held from a message's first byte to its last, so messages never
/// interleave. Nobody waits for the lock: a writer that finds it taken, or
/// no room, keeps its messages queued for a later flush.
class response_appender {
public:
  void push(std::string message) {
    queue_.push(std::move(message));
  }
  /// True once nothing is queued.
  bool flush(channel_segment& segment);
  bool empty() const {
    return queue_.empty();
  }

private:
  message_writer queue_;
  bool locked_ = false;
};

/// The coordinator's end of a process set's control channel on its host:
/// a shared-memory segment through which the set's members on this host
/// send their request lists and receive the response lists, instead of
/// TCP connections through CAF's network layer. Members on other hosts (or
/// that cannot open it) keep using CAF; each member uses one path for
/// everything, so its messages keep their order.
class channel_host {
public:
  /// Creates the segment for set ranks 0 .. members - 1. Throws
  /// std::runtime_error when /dev/shm refuses.
  explicit channel_host(int members, channel_sizes sizes = {});
  ~channel_host();
  channel_host(const channel_host&) = delete;
  channel_host& operator=(const channel_host&) = delete;

  /// The segment's name, for the members.
  const std::string& name() const;

  /// Starts the thread that reads every member's request lists and passes
  /// each to `deliver`, each member's in the order sent.
  void start(deliver_fn deliver);

  /// Queues a response list for every member that opened the channel and
  /// writes what fits: false while some is still queued (a member reads
  /// slowly); flush() later.
  bool post(std::string list);
  bool flush();

  /// Bytes written into the response stream so far: unchanged between two
  /// flushes while some member reads nothing.
  uint64_t written() const;

  /// Gives up on the members that left the most of the response stream
  /// unread (a member killed or frozen without closing its end): they hold
  /// nothing back from now on, and their next read fails. Returns their set
  /// ranks.
  std::vector<int> drop_slowest();

  /// Removes the name once every member has opened the channel or given up
  /// on it; the memory stays until the last mapping goes.
  void unlink();

  /// The arrival board (null without one).
  arrival_board* board();

private:
  std::unique_ptr<channel_segment> segment_;
  response_appender responses_;
  std::unique_ptr<bell_reader> reader_;
};

/// A member's end: opened by the member's negotiator when the coordinator
/// runs in another process.
class channel_member {
public:
  /// Opens `name` as set rank `member`: null when it cannot (another host,
  /// the segment gone, or not the channel it should be).
  static std::unique_ptr<channel_member> open(const std::string& name, int member);
  ~channel_member();
  channel_member(const channel_member&) = delete;
  channel_member& operator=(const channel_member&) = delete;

  /// Starts the thread that passes each response list to `deliver`, and
  /// says why to `on_broken` (once, on that thread) when the response
  /// stream can no longer be read: the coordinator dropped this member
  /// (see channel_host::drop_slowest) or the stream is corrupt. Nothing
  /// more arrives then.
  void start(deliver_fn deliver, deliver_fn on_broken = {});

  /// Queues a request list and writes what fits: false while some is still
  /// queued; flush() later.
  bool send(std::string list);
  /// Queues an agreed list (see arrival_board) for every member's
  /// response stream, in order behind those still queued: false while some
  /// is; flush() later.
  bool agree(std::string list);
  /// Writes an agreed list and takes it out of this member's own reading
  /// at once, when this member's reader has taken everything before it and
  /// `idle()` (called under the reader's lock) says that everything the
  /// reader passed on was handled: true then, and the caller handles the
  /// list itself (its reader is not woken for it). False, with nothing
  /// written, when it cannot: agree() then.
  bool agree_inline(const std::string& list, const std::function<bool()>& idle);
  bool flush();
  /// Takes the whole messages the response stream holds for this member on
  /// the caller's thread, in order, when the reader is not draining and
  /// `idle()` (called under the reader's lock) says that everything the
  /// reader passed on was handled: the caller handles them itself. None,
  /// with nothing read, otherwise.
  std::vector<std::string> take_inline(const std::function<bool()>& idle);

  /// While one lives, its creator waits for this member's next message
  /// itself (take_inline on its own thread): writers do not wake the
  /// reader, and the reader stops polling (for good: a reply window that
  /// expect_reply opened ends here), which would only take the CPU the
  /// creator polls on. At its end the reader is woken for what the creator
  /// left unread, or for the coordinator's end closing.
  class taking_scope {
  public:
    explicit taking_scope(channel_member& member) : member_(member) {
      member_.begin_taking();
    }
    ~taking_scope() {
      member_.end_taking();
    }
    taking_scope(const taking_scope&) = delete;
    taking_scope& operator=(const taking_scope&) = delete;

  private:
    channel_member& member_;
  };

  /// After expect_reply(), the reader looks for the next message for up to
  /// `window` before it sleeps (ipc::poll_for), saving the futex wake-up
  /// of a reader asleep: for members that each have a core of their own
  /// (backends::rank_bound). 0 (the default): it sleeps at once.
  /// Before start().
  void poll_replies(std::chrono::microseconds window);
  /// This member sent a list or posted an arrival: a reply is due. The
  /// reader polls until the next message comes or the window ends, not
  /// while the rank computes.
  void expect_reply();

  /// The arrival board (null when the segment has none, or for a set too
  /// large for its masks).
  arrival_board* board();

  /// Whether the response stream holds bytes this member's reader has not
  /// taken yet.
  bool unread() const;

private:
  channel_member(std::unique_ptr<channel_segment> segment, int member);
  void begin_taking();
  void end_taking();

  std::unique_ptr<channel_segment> segment_;
  int member_;
  message_writer requests_;
  response_appender agreed_;
  // Held by the reader thread while it drains, and by agree_inline() and
  // take_inline(); so are the two below.
  std::shared_ptr<std::mutex> reader_mutex_ = std::make_shared<std::mutex>();
  std::shared_ptr<message_reader> responses_ = std::make_shared<message_reader>();
  std::shared_ptr<bool> broken_ = std::make_shared<bool>(false);
  deliver_fn on_broken_;
  std::shared_ptr<reply_watch> watch_;
  std::unique_ptr<bell_reader> reader_;
};

} // namespace troupe::control
