#include "control/shm_channel.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <pthread.h>

#include <spdlog/spdlog.h>

#include "control/byte_stream.hpp"
#include "ipc/futex.hpp"
#include "ipc/shm_segment.hpp"

namespace troupe::control {

namespace {

using clock = std::chrono::steady_clock;

constexpr uint64_t channel_magic = 0x54524f5550454331;  // "TROUPEC1"

// A sleeping reader's backstop: every reason to wake (a write, the
// coordinator's end closing, the reader stopping) rings its bell, and the
// ring wakes it unless its actor waits for the messages itself; the actor
// then wakes it for what it left (channel_member::taking_scope). Each
// timeout costs an idle rank a wake-up (at 50 ms, two readers' 40 a second
// were a fifth of an idle rank's CPU, docs/benchmarks.md run (26)).
constexpr auto idle_wake = std::chrono::seconds(1);

// A futex word its writers bump after each write, and the readers sleeping
// on it (woken only when there are some, and only when the reader's actor
// is not waiting for the messages itself: channel_member::taking_scope).
struct bell {
  alignas(64) std::atomic<uint32_t> rings;
  std::atomic<uint32_t> sleepers;
  std::atomic<uint32_t> taking;

  void ring() {
    rings.fetch_add(1);
    // Pairs with end_taking's: either this sees the flag cleared, or
    // end_taking sees what was written before this ring.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers.load() > 0 && taking.load() == 0)
      ipc::futex_wake_all(&rings);
  }
};

struct channel_header {
  std::atomic<uint64_t> magic;
  uint32_t members;
  uint64_t request_bytes;
  uint64_t response_bytes;
  uint64_t arrival_words;
  uint64_t segment_bytes;
  bell requests;   // rung by members
  // (Each member's reader sleeps on its own bell, which follows the header:
  // whoever writes into the response stream rings the others'.)
  alignas(64) std::atomic<uint32_t> closed;  // the coordinator's end is gone
  // 1 while a writer of the response stream is in the middle of a
  // message. Not a mutex: the coordinator may finish a long message on
  // another thread than it began on. A writer that dies holding it holds
  // out the others, as its death breaks the set anyway.
  alignas(64) std::atomic<uint32_t> append_lock;
};

static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "arrival words are shared between processes");

// The segment but the members' request streams: header, reader bells,
// response stream, arrival board.
size_t shared_part_bytes(size_t members, const channel_sizes& s) {
  return sizeof(channel_header) + members * sizeof(bell) +
         byte_stream::bytes_needed(members, s.response_bytes) +
         s.arrival_words * arrival_board::bytes_per_id;
}

size_t layout_bytes(size_t members, const channel_sizes& s) {
  return shared_part_bytes(members, s) + members * byte_stream::bytes_needed(1, s.request_bytes);
}

// Whether a header read from a segment of `bytes` describes it: any process
// of the job's user can write there, so nothing is trusted that could
// divide by zero, wrap the layout's arithmetic or reach past the mapping.
bool layout_fits(size_t members, const channel_sizes& s, size_t bytes) {
  if (members == 0 || s.request_bytes == 0 || s.response_bytes == 0 ||
      s.request_bytes > bytes || s.response_bytes > bytes || members > bytes)
    return false;
  // Each term is below 2 x bytes now; only the product can wrap.
  size_t requests = 0;
  if (__builtin_mul_overflow(members, byte_stream::bytes_needed(1, s.request_bytes), &requests))
    return false;
  if (s.arrival_words > bytes / arrival_board::bytes_per_id || members > bytes / sizeof(bell))
    return false;
  const size_t rest = shared_part_bytes(members, s);
  return requests <= bytes && rest <= bytes && requests + rest == bytes;
}

} // namespace

// The mapped segment and the streams in it: the response stream (one
// reader per member), then one request stream per member.
class channel_segment {
public:
  channel_segment(ipc::shm_segment segment, size_t members, channel_sizes sizes)
      : segment_(std::move(segment)),
        header_(static_cast<channel_header*>(segment_.data())),
        bells_(reinterpret_cast<bell*>(static_cast<char*>(segment_.data()) +
                                       sizeof(channel_header))),
        responses_(static_cast<char*>(segment_.data()) + sizeof(channel_header) +
                     members * sizeof(bell),
                   members, sizes.response_bytes) {
    char* at = static_cast<char*>(segment_.data()) + sizeof(channel_header) +
               members * sizeof(bell) + byte_stream::bytes_needed(members, sizes.response_bytes);
    for (size_t m = 0; m < members; ++m) {
      requests_.emplace_back(at, 1, sizes.request_bytes);
      at += byte_stream::bytes_needed(1, sizes.request_bytes);
    }
    if (sizes.arrival_words > 0 && members <= arrival_board::max_members)
      board_.emplace(reinterpret_cast<std::atomic<uint64_t>*>(at), sizes.arrival_words,
                     static_cast<int>(members));
  }

  ipc::shm_segment& segment() {
    return segment_;
  }
  channel_header& header() {
    return *header_;
  }
  byte_stream& responses() {
    return responses_;
  }
  byte_stream& requests(size_t member) {
    return requests_[member];
  }
  size_t members() const {
    return requests_.size();
  }
  arrival_board* board() {
    return board_ ? &*board_ : nullptr;
  }
  // The bell member `m`'s reader sleeps on.
  bell& reader_bell(size_t m) {
    return bells_[m];
  }
  // After a write into the response stream: wakes every member's reader
  // but `writer`'s (none: -1).
  void ring_readers(long writer = -1) {
    for (size_t m = 0; m < members(); ++m)
      if (static_cast<long>(m) != writer)
        bells_[m].ring();
  }

  // The response stream's lock, without waiting.
  bool try_lock() {
    uint32_t free = 0;
    return header_->append_lock.compare_exchange_strong(free, 1, std::memory_order_acquire);
  }
  void unlock() {
    header_->append_lock.store(0, std::memory_order_release);
  }

private:
  ipc::shm_segment segment_;
  channel_header* header_;
  bell* bells_;
  byte_stream responses_;
  std::vector<byte_stream> requests_;
  std::optional<arrival_board> board_;
};

bool response_appender::flush(channel_segment& segment) {
  if (queue_.empty())
    return true;
  if (!locked_) {
    if (!segment.try_lock())
      return false;
    locked_ = true;
    segment.responses().sync_writer();
  }
  auto& stream = segment.responses();
  const auto before = stream.written();
  const bool done = queue_.flush(stream);
  if (!queue_.mid_message()) {
    locked_ = false;
    segment.unlock();
  }
  if (stream.written() != before)
    segment.ring_readers();
  return done;
}

// When a member's reader polls for the reply to what it sent (see
// channel_member::poll_replies).
struct reply_watch {
  std::chrono::microseconds window{0};
  // steady_clock ticks; the reader polls while before it.
  std::atomic<int64_t> until{0};
};

// A thread that drains streams whenever their bell rings, and sleeps on it
// otherwise.
class bell_reader {
public:
  bell_reader(bell& b, std::function<bool()> drain, std::shared_ptr<reply_watch> watch = nullptr)
      : bell_(b), drain_(std::move(drain)), watch_(std::move(watch)) {
    // Started by the runtime's scheduler: runs on its CPUs (pinned with a
    // runtime CPU). Named for top and perf.
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "troupe.channel");
      run();
    });
  }
  ~bell_reader() {
    stop_ = true;
    // A ring, not only a wake: a reader between its look at the flag and
    // its futex wait then finds the count moved and does not sleep.
    bell_.ring();
    thread_.join();
  }

private:
  void run() {
    while (!stop_) {
      const uint32_t seen = bell_.rings.load();
      if (!drain_())
        return;
      if (awaited(seen))
        continue;
      bell_.sleepers.fetch_add(1);
      if (bell_.rings.load() == seen && !stop_)
        ipc::futex_wait(&bell_.rings, seen, idle_wake);
      bell_.sleepers.fetch_sub(1);
    }
  }

  // Polls for a ring while a reply is due (none are while the rank
  // computes): true when one came, which ends the wait for it. Only on a
  // bound rank (a window above 0): unbound, a polling reader delays the
  // threads it waits for (2 ranks on 2 CPUs, a 4-byte allreduce under MPI:
  // 78 us sleeping, 96 us polling).
  bool awaited(uint32_t seen) {
    if (!watch_)
      return false;
    const auto until = clock::time_point(clock::duration(watch_->until.load()));
    const auto now = clock::now();
    if (now >= until)
      return false;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - now);
    // Yielding from the first look: the negotiator and the backend whose
    // turn it is run on this CPU (a bound rank's runtime threads share one),
    // and a reader on the CPU's pause held it for 20 us whenever the kernel
    // let it run first, after every message it passed on (2 ranks, a
    // 4-byte allreduce under MPI: mean 29.0 -> 25.3 us, p90 50 -> 32 us;
    // docs/benchmarks.md run (39)).
    if (!ipc::poll_for(
          [&] { return bell_.rings.load() != seen || stop_ || watch_->until.load() == 0; },
          left, std::chrono::microseconds(0)))
      return false;
    if (bell_.rings.load() == seen && !stop_)
      return false;  // the actor waits for it instead (begin_taking)
    watch_->until.store(0);
    return true;
  }

  bell& bell_;
  std::function<bool()> drain_;
  std::shared_ptr<reply_watch> watch_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

namespace {

// Runs `reader.drain`, logging and stopping the stream for good when it is
// corrupt (only a process of the job's user can write there) or this
// reader was dropped: returns why, the one time it stops.
std::optional<std::string> drain_or_stop(message_reader& reader, byte_stream& stream,
                                         size_t index, const deliver_fn& deliver, bool& broken,
                                         const char* which) {
  if (broken)
    return std::nullopt;
  try {
    reader.drain(stream, index, deliver);
    return std::nullopt;
  } catch (const std::exception& e) {
    spdlog::error("control channel: {} stream {}: {}; its messages are ignored from now on",
                  which, index, e.what());
    broken = true;
    return std::string(e.what());
  }
}

} // namespace

// --- the coordinator's end ---------------------------------------------------

channel_host::channel_host(int members, channel_sizes sizes) {
  const auto count = static_cast<size_t>(members);
  const auto bytes = layout_bytes(count, sizes);
  auto segment = ipc::shm_segment::create(ipc::fresh_segment_name("ctl-"), bytes);
  auto* h = new (segment.data()) channel_header{};
  h->members = static_cast<uint32_t>(members);
  h->request_bytes = sizes.request_bytes;
  h->response_bytes = sizes.response_bytes;
  h->arrival_words = sizes.arrival_words;
  h->segment_bytes = bytes;
  segment_ = std::make_unique<channel_segment>(std::move(segment), count, sizes);
  for (size_t m = 0; m < count; ++m)
    segment_->requests(m).set_active(0, true);
  // Written last: a member that sees the magic sees the rest.
  h->magic.store(channel_magic, std::memory_order_release);
}

channel_host::~channel_host() {
  reader_.reset();
  segment_->header().closed.store(1);
  segment_->ring_readers();
}

const std::string& channel_host::name() const {
  return segment_->segment().name();
}

void channel_host::start(deliver_fn deliver) {
  auto* seg = segment_.get();
  auto readers = std::make_shared<std::vector<message_reader>>(seg->members());
  auto broken = std::make_shared<std::vector<char>>(seg->members(), 0);
  reader_ = std::make_unique<bell_reader>(
    seg->header().requests, [seg, readers, broken, deliver = std::move(deliver)] {
      for (size_t m = 0; m < seg->members(); ++m) {
        bool b = (*broken)[m] != 0;
        drain_or_stop((*readers)[m], seg->requests(m), 0, deliver, b, "request");
        (*broken)[m] = b;
      }
      return true;
    });
}

bool channel_host::post(std::string list) {
  responses_.push(std::move(list));
  return flush();
}

bool channel_host::flush() {
  return responses_.flush(*segment_);
}

uint64_t channel_host::written() const {
  return segment_->responses().written();
}

std::vector<int> channel_host::drop_slowest() {
  std::vector<int> ranks;
  auto& stream = segment_->responses();
  for (size_t member : stream.slowest()) {
    stream.drop(member);
    ranks.push_back(static_cast<int>(member));
  }
  // A dropped member that is only slow finds out at its next read.
  segment_->ring_readers();
  return ranks;
}

void channel_host::unlink() {
  segment_->segment().unlink();
}

arrival_board* channel_host::board() {
  return segment_->board();
}

// --- a member's end ----------------------------------------------------------

std::unique_ptr<channel_member> channel_member::open(const std::string& name, int member) {
  try {
    auto segment = ipc::shm_segment::open(name);
    segment.keep_name();  // a member never removes the coordinator's channel
    if (segment.size() < sizeof(channel_header))
      return nullptr;
    auto& h = *static_cast<channel_header*>(segment.data());
    if (h.magic.load(std::memory_order_acquire) != channel_magic)
      return nullptr;
    // Read once: what is checked is what is used.
    const size_t members = h.members;
    const channel_sizes sizes{h.request_bytes, h.response_bytes, h.arrival_words};
    if (member < 0 || static_cast<size_t>(member) >= members ||
        h.segment_bytes != segment.size() || !layout_fits(members, sizes, segment.size()))
      return nullptr;
    auto seg = std::make_unique<channel_segment>(std::move(segment), members, sizes);
    if (seg->responses().written() != 0)
      return nullptr;  // too late to read the lists from the start
    seg->responses().set_active(static_cast<size_t>(member), true);
    return std::unique_ptr<channel_member>(new channel_member(std::move(seg), member));
  } catch (const std::exception& e) {
    spdlog::debug("control channel {}: not opened ({}); using the network", name, e.what());
    return nullptr;
  }
}

channel_member::channel_member(std::unique_ptr<channel_segment> segment, int member)
    : segment_(std::move(segment)), member_(member), watch_(std::make_shared<reply_watch>()) {
}

channel_member::~channel_member() {
  reader_.reset();
  segment_->responses().set_active(static_cast<size_t>(member_), false);
}

void channel_member::start(deliver_fn deliver, deliver_fn on_broken) {
  auto* seg = segment_.get();
  const auto index = static_cast<size_t>(member_);
  on_broken_ = on_broken;
  reader_ = std::make_unique<bell_reader>(
    seg->reader_bell(index), [seg, index, reader = responses_, broken = broken_,
                              deliver = std::move(deliver), on_broken = std::move(on_broken),
                              mutex = reader_mutex_] {
      std::optional<std::string> why;
      {
        std::lock_guard<std::mutex> hold(*mutex);
        why = drain_or_stop(*reader, seg->responses(), index, deliver, *broken, "response");
      }
      if (why && on_broken)
        on_broken(std::move(*why));
      // The coordinator's end is gone once closed and drained: nothing more
      // can come.
      return !(seg->header().closed.load() && !seg->responses().has_unread(index));
    },
    watch_);
}

void channel_member::poll_replies(std::chrono::microseconds window) {
  watch_->window = window;
}

void channel_member::expect_reply() {
  if (watch_->window.count() > 0)
    watch_->until.store((clock::now() + watch_->window).time_since_epoch().count());
}

void channel_member::begin_taking() {
  segment_->reader_bell(static_cast<size_t>(member_)).taking.store(1);
  watch_->until.store(0);
}

void channel_member::end_taking() {
  auto& b = segment_->reader_bell(static_cast<size_t>(member_));
  b.taking.store(0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // What was written meanwhile rang no one: the reader, perhaps asleep,
  // reads what the actor left, or finds the coordinator's end closed.
  if (unread() || segment_->header().closed.load())
    b.ring();
}

bool channel_member::send(std::string list) {
  requests_.push(std::move(list));
  return flush();
}

bool channel_member::agree_inline(const std::string& list, const std::function<bool()>& idle) {
  if (!agreed_.empty())
    return false;  // it goes behind those
  std::lock_guard<std::mutex> hold(*reader_mutex_);
  if (!segment_->try_lock())
    return false;
  auto& stream = segment_->responses();
  bool done = false;
  try {
    stream.sync_writer();
    const size_t frame = 4 + list.size();
    // Everything written before is whole (nobody holds the lock) and read
    // here, and handed on and handled: this list is next here too.
    if (!stream.has_unread(static_cast<size_t>(member_)) && idle() &&
        stream.room() >= frame) {
      message_writer whole;  // fits: written at once
      whole.push(list);
      whole.flush(stream);
      done = true;  // out for the others, whatever follows
      std::string taken(frame, '\0');
      stream.read_some(static_cast<size_t>(member_), taken.data(), frame);
    }
  } catch (const std::exception&) {
    // Dropped or corrupt: this member's reader says so at its next read.
  }
  segment_->unlock();
  if (done)
    segment_->ring_readers(member_);
  return done;
}

std::vector<std::string> channel_member::take_inline(const std::function<bool()>& idle) {
  std::vector<std::string> taken;
  std::unique_lock<std::mutex> hold(*reader_mutex_, std::try_to_lock);
  if (!hold.owns_lock() || !idle())
    return taken;
  auto why = drain_or_stop(
    *responses_, segment_->responses(), static_cast<size_t>(member_),
    [&taken](std::string message) { taken.push_back(std::move(message)); }, *broken_,
    "response");
  hold.unlock();
  if (why && on_broken_)
    on_broken_(std::move(*why));
  return taken;
}

bool channel_member::agree(std::string list) {
  agreed_.push(std::move(list));
  return flush();
}

bool channel_member::flush() {
  auto& stream = segment_->requests(static_cast<size_t>(member_));
  const auto before = stream.written();
  const bool done = requests_.flush(stream);
  if (stream.written() != before)
    segment_->header().requests.ring();
  return agreed_.flush(*segment_) && done;
}

arrival_board* channel_member::board() {
  return segment_->board();
}

bool channel_member::unread() const {
  return segment_->responses().has_unread(static_cast<size_t>(member_));
}

} // namespace troupe::control
