#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace troupe::control {

/// Bytes in shared memory with one writer and a fixed number of readers,
/// each of which consumes every byte. The writer never overwrites what an
/// active reader has not read yet; an inactive reader holds nothing back.
/// A view: the memory (zeroed for a new stream) belongs to a segment.
///
/// Any process that maps the segment can write anything into the shared
/// positions, so each side keeps its own position and only publishes it:
/// a reader whose published position is impossible holds nothing back, and
/// a reader that sees more unread bytes than the stream holds throws
/// instead of reading past it.
class byte_stream {
public:
  /// Bytes of shared memory a stream of `capacity` bytes and `readers`
  /// readers takes (a multiple of 64).
  static size_t bytes_needed(size_t readers, size_t capacity);

  byte_stream(void* at, size_t readers, size_t capacity);

  /// Writes as much of `data` as the slowest active reader leaves room for;
  /// returns how much.
  size_t write_some(const char* data, size_t n);

  /// Copies up to `n` unread bytes into `out` and consumes them. Throws
  /// std::runtime_error when the stream is corrupt (see unread).
  size_t read_some(size_t reader, char* out, size_t n);

  /// Bytes `reader` has not read yet; throws std::runtime_error when that is
  /// more than the stream holds (its shared position was overwritten).
  size_t unread(size_t reader) const;

  /// Whether `reader` has bytes to read, from its shared position: safe
  /// from a thread other than the one that reads for `reader`.
  bool has_unread(size_t reader) const;

  /// Bytes written since the stream began.
  uint64_t written() const;

  /// For a stream whose writers take turns under a lock: this view writes
  /// on from where the last writer left off.
  void sync_writer();

  /// Bytes write_some() would take now.
  size_t room() const;

  /// Whether `reader` counts for the writer's room. A reader starts at the
  /// stream's beginning: activate it before anything is written.
  void set_active(size_t reader, bool active);

  /// The active readers that left the most unread (none when all is read):
  /// those the writer waits for.
  std::vector<size_t> slowest() const;

  /// The writer gives up on `reader`: it holds nothing back from now on, and
  /// its next read throws instead of reading what was overwritten.
  void drop(size_t reader);

private:
  struct header;
  struct reader_slot;

  header* header_;
  reader_slot* readers_;
  char* data_;
  size_t reader_count_;
  size_t capacity_;
  // This view's own positions, as of its construction: what it wrote (as
  // the writer) and what each reader read (as that reader).
  uint64_t written_;
  std::vector<uint64_t> read_;
};

/// Length-prefixed messages over a byte_stream, in order. A message longer
/// than the stream's room goes out in pieces as the readers make room.
class message_writer {
public:
  /// Queues `message` behind what is still queued.
  void push(std::string message);

  /// Writes what fits; true once nothing is queued.
  bool flush(byte_stream& stream);

  bool empty() const {
    return queue_.empty();
  }

  /// Part of the front message is written, the rest not yet.
  bool mid_message() const {
    return written_ > 0;
  }

private:
  std::deque<std::string> queue_;
  // Bytes of the front message's frame (prefix + body) already written.
  size_t written_ = 0;
};

/// The reading side of message_writer for one reader of a stream.
class message_reader {
public:
  /// Longest message accepted; a longer prefix means the stream is corrupt.
  static constexpr uint32_t max_message = 1u << 30;

  /// Consumes what `stream` holds for `reader`, calling `deliver` for each
  /// complete message. Throws std::runtime_error on a corrupt prefix.
  void drain(byte_stream& stream, size_t reader,
             const std::function<void(std::string)>& deliver);

private:
  char prefix_[4] = {};
  size_t have_prefix_ = 0;
  // The announced message grows as its bytes arrive: a prefix alone never
  // allocates what it announces.
  std::string body_;
  size_t body_size_ = 0;
};

} // namespace troupe::control
