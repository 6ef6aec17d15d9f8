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
  std::atomic<uint32_t> active;
};

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
      capacity_(capacity) {
}

size_t byte_stream::write_some(const char* data, size_t n) {
  const uint64_t written = header_->written.load(std::memory_order_relaxed);
  uint64_t oldest = written;
  for (size_t r = 0; r < reader_count_; ++r)
    if (readers_[r].active.load(std::memory_order_acquire))
      oldest = std::min(oldest, readers_[r].read.load(std::memory_order_acquire));
  const size_t room = capacity_ - static_cast<size_t>(written - oldest);
  const size_t count = std::min(n, room);
  const size_t at = static_cast<size_t>(written % capacity_);
  const size_t first = std::min(count, capacity_ - at);
  std::memcpy(data_ + at, data, first);
  std::memcpy(data_, data + first, count - first);
  header_->written.store(written + count, std::memory_order_release);
  return count;
}

size_t byte_stream::read_some(size_t reader, char* out, size_t n) {
  auto& slot = readers_[reader];
  const uint64_t read = slot.read.load(std::memory_order_relaxed);
  const uint64_t written = header_->written.load(std::memory_order_acquire);
  const size_t count = std::min(n, static_cast<size_t>(written - read));
  const size_t at = static_cast<size_t>(read % capacity_);
  const size_t first = std::min(count, capacity_ - at);
  std::memcpy(out, data_ + at, first);
  std::memcpy(out + first, data_, count - first);
  slot.read.store(read + count, std::memory_order_release);
  return count;
}

bool byte_stream::has_unread(size_t reader) const {
  return header_->written.load(std::memory_order_acquire) !=
         readers_[reader].read.load(std::memory_order_relaxed);
}

uint64_t byte_stream::written() const {
  return header_->written.load(std::memory_order_acquire);
}

void byte_stream::set_active(size_t reader, bool active) {
  readers_[reader].active.store(active ? 1 : 0, std::memory_order_release);
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
      body_.resize(size);
      have_body_ = 0;
    }
    have_body_ += stream.read_some(reader, body_.data() + have_body_, body_.size() - have_body_);
    if (have_body_ < body_.size())
      return;
    have_prefix_ = 0;
    deliver(std::move(body_));
    body_ = {};
  }
}

} // namespace troupe::control
