#include "control/byte_stream.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace troupe::control {

struct byte_stream::header {
  alignas(64) std::atomic<uint64_t> written;
};

struct byte_stream::reader_slot {
  alignas(64) std::atomic<uint64_t> read;
  std::atomic<uint32_t> active;  // 0, 1, or dropped
};

namespace {
constexpr uint32_t slot_active = 1;
constexpr uint32_t slot_dropped = 2;

[[noreturn]] void throw_dropped() {
  throw std::runtime_error("dropped by the writer, which waited too long for this reader to "
                           "make room");
}

} // namespace

static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "stream positions are shared between processes");

size_t byte_stream::bytes_needed(size_t readers, size_t capacity) {
  const size_t data = (capacity + 63) / 64 * 64;
  return sizeof(header) + readers * sizeof(reader_slot) + data;
}

byte_stream::byte_stream(void* at, size_t readers, size_t capacity)
    : header_(static_cast<header*>(at)),
      readers_(reinterpret_cast<reader_slot*>(static_cast<char*>(at) + sizeof(header))),
      data_(static_cast<char*>(at) + sizeof(header) + readers * sizeof(reader_slot)),
      reader_count_(readers),
      capacity_(capacity),
      written_(header_->written.load(std::memory_order_relaxed)),
      read_(readers) {
  for (size_t r = 0; r < readers; ++r)
    read_[r] = readers_[r].read.load(std::memory_order_relaxed);
}

size_t byte_stream::room() const {
  uint64_t behind = 0;  // the most an active reader has left unread
  for (size_t r = 0; r < reader_count_; ++r)
    if (readers_[r].active.load(std::memory_order_acquire) == slot_active) {
      const uint64_t unread = written_ - readers_[r].read.load(std::memory_order_acquire);
      // Ahead of the writer or further behind than the stream holds: not a
      // position a reader can have, so it holds nothing back (it finds its
      // stream corrupt).
      if (unread <= capacity_)
        behind = std::max(behind, unread);
    }
  return capacity_ - static_cast<size_t>(behind);
}

size_t byte_stream::write_some(const char* data, size_t n) {
  const size_t count = std::min(n, room());
  const size_t at = static_cast<size_t>(written_ % capacity_);
  const size_t first = std::min(count, capacity_ - at);
  std::memcpy(data_ + at, data, first);
  std::memcpy(data_, data + first, count - first);
  written_ += count;
  header_->written.store(written_, std::memory_order_release);
  return count;
}

size_t byte_stream::unread(size_t reader) const {
  if (readers_[reader].active.load(std::memory_order_acquire) == slot_dropped)
    throw_dropped();
  const uint64_t unread = header_->written.load(std::memory_order_acquire) - read_[reader];
  if (unread > capacity_)
    throw std::runtime_error("corrupt control stream: " + std::to_string(unread) +
                             " bytes unread in a stream of " + std::to_string(capacity_));
  return static_cast<size_t>(unread);
}

size_t byte_stream::read_some(size_t reader, char* out, size_t n) {
  const size_t count = std::min(n, unread(reader));
  const size_t at = static_cast<size_t>(read_[reader] % capacity_);
  const size_t first = std::min(count, capacity_ - at);
  std::memcpy(out, data_ + at, first);
  std::memcpy(out + first, data_, count - first);
  // Dropped during the copy: the writer may have overwritten what was
  // copied (it orders the drop before its next write).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (readers_[reader].active.load(std::memory_order_relaxed) == slot_dropped)
    throw_dropped();
  read_[reader] += count;
  readers_[reader].read.store(read_[reader], std::memory_order_release);
  return count;
}

bool byte_stream::has_unread(size_t reader) const {
  return header_->written.load(std::memory_order_acquire) !=
         readers_[reader].read.load(std::memory_order_acquire);
}

uint64_t byte_stream::written() const {
  return header_->written.load(std::memory_order_acquire);
}

void byte_stream::sync_writer() {
  written_ = header_->written.load(std::memory_order_acquire);
}

void byte_stream::set_active(size_t reader, bool active) {
  readers_[reader].active.store(active ? slot_active : 0, std::memory_order_release);
}

std::vector<size_t> byte_stream::slowest() const {
  std::vector<size_t> out;
  uint64_t most = 1;
  for (size_t r = 0; r < reader_count_; ++r) {
    if (readers_[r].active.load(std::memory_order_acquire) != slot_active)
      continue;
    const uint64_t unread = written_ - readers_[r].read.load(std::memory_order_acquire);
    if (unread > capacity_ || unread < most)
      continue;  // (an impossible position holds nothing back anyway)
    if (unread > most)
      out.clear();
    most = unread;
    out.push_back(r);
  }
  return out;
}

void byte_stream::drop(size_t reader) {
  readers_[reader].active.store(slot_dropped, std::memory_order_seq_cst);
  // Before any later write of this writer: a reader copying then sees the
  // drop after its copy (read_some).
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void message_writer::push(std::string message) {
  if (message.size() > message_reader::max_message)
    throw std::length_error("control message of " + std::to_string(message.size()) +
                            " bytes: longer than the channel's limit");
  queue_.push_back(std::move(message));
}

bool message_writer::flush(byte_stream& stream) {
  while (!queue_.empty()) {
    const auto& front = queue_.front();
    if (written_ < 4) {
      const auto size = static_cast<uint32_t>(front.size());
      char prefix[4];
      std::memcpy(prefix, &size, 4);
      written_ += stream.write_some(prefix + written_, 4 - written_);
      if (written_ < 4)
        return false;
    }
    const size_t body_done = written_ - 4;
    written_ += stream.write_some(front.data() + body_done, front.size() - body_done);
    if (written_ < 4 + front.size())
      return false;
    queue_.pop_front();
    written_ = 0;
  }
  return true;
}

void message_reader::drain(byte_stream& stream, size_t reader,
                           const std::function<void(std::string)>& deliver) {
  for (;;) {
    if (have_prefix_ < 4) {
      have_prefix_ += stream.read_some(reader, prefix_ + have_prefix_, 4 - have_prefix_);
      if (have_prefix_ < 4)
        return;
      uint32_t size = 0;
      std::memcpy(&size, prefix_, 4);
      if (size > max_message)
        throw std::runtime_error("corrupt control stream: a message of " +
                                 std::to_string(size) + " bytes announced");
      body_size_ = size;
    }
    const size_t have = body_.size();
    body_.resize(have + std::min(body_size_ - have, stream.unread(reader)));
    stream.read_some(reader, body_.data() + have, body_.size() - have);
    if (body_.size() < body_size_)
      return;
    have_prefix_ = 0;
    deliver(std::move(body_));
    body_ = {};
  }
}

} // namespace troupe::control
