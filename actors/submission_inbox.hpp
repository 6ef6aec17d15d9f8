#pragma once

// No CAF here: the API's submission path includes it.

#include <mutex>
#include <vector>

#include "actors/tensor_entry.hpp"

namespace troupe::actors {

/// Collectives submitted to one negotiator and not yet taken by it. A
/// caller appends and tells the negotiator only when no earlier append is
/// still waiting to be taken, so a burst of submissions (a backward pass's
/// gradients, one call each) costs the negotiator one message and one
/// flush instead of one each, and the callers one wake-up.
class submission_inbox {
public:
  submission_inbox() = default;
  submission_inbox(const submission_inbox&) = delete;
  submission_inbox& operator=(const submission_inbox&) = delete;
  ~submission_inbox() {
    close();
  }

  enum class put_result {
    signal,  // appended; the caller must tell the negotiator
    queued,  // appended behind entries the negotiator is already told of
    closed,  // refused: the handles were failed (not_accepted())
  };

  /// Appends `batch` (accepted or refused as a whole by the negotiator).
  put_result put(entry_batch batch);
  /// Moves everything appended since the last take into `into` (empty),
  /// batch by batch, in order. The two vectors trade buffers: a taker that
  /// clears `into` after use and takes into it again leaves the inbox a
  /// buffer that needs no growing, so a burst of submissions allocates no
  /// queue (a fresh queue's growth made malloc consolidate its free lists
  /// on the submitting thread, several times per 200 x 4 KiB step).
  void take(std::vector<entry_batch>& into);
  /// Fails what is queued and every later put (the negotiator stopped:
  /// shutdown, reset, removal). Idempotent.
  void close();

private:
  std::mutex mutex_;
  std::vector<entry_batch> queued_;
  bool signalled_ = false;  // a message to the negotiator is on its way
  bool closed_ = false;
};

} // namespace troupe::actors
