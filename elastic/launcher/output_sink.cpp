#include "elastic/launcher/output_sink.hpp"

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include <csignal>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

namespace troupe::elastic::launcher {

struct output_sink::state {
  int fd;
  size_t bound;
  std::mutex mtx;
  std::condition_variable changed;
  // Lines, and in their place the count of lines dropped there (text
  // empty), so the notice comes out where the gap is.
  struct item {
    std::string text;
    size_t dropped = 0;
  };
  std::deque<item> queue;
  size_t queued_bytes = 0;
  size_t dropped = 0;    // lines, in all
  bool writing = false;  // the thread holds an item outside the queue
  bool stopping = false;

  // Writes all of `text`; false when the reader went away for good.
  bool write_all(std::string_view text) const {
    while (!text.empty()) {
      const auto n = ::write(fd, text.data(), text.size());
      if (n > 0) {
        text.remove_prefix(static_cast<size_t>(n));
      } else if (n < 0 && errno == EAGAIN) {  // a non-blocking descriptor we inherited
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
      } else if (n < 0 && errno != EINTR) {
        return false;
      }
    }
    return true;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mtx);
    for (;;) {
      changed.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return;  // stopping, and everything is out
      auto next = std::move(queue.front());
      queue.pop_front();
      queued_bytes -= next.text.size();
      const auto text = next.dropped == 0
                          ? std::move(next.text)
                          : "troupe-run: dropped " + std::to_string(next.dropped) +
                              " line(s) of output here: nothing read it for a while\n";
      writing = true;
      lock.unlock();
      const bool open = write_all(text);
      lock.lock();
      writing = false;
      changed.notify_all();
      if (!open) {  // no reader any more: the output is dropped, as before
        queue.clear();
        queued_bytes = 0;
      }
    }
  }
};

output_sink::output_sink(int fd, size_t bound) : state_(std::make_shared<state>()) {
  state_->fd = fd;
  state_->bound = bound;
  // Every signal blocked in the thread (it inherits the mask it is created
  // with): troupe-run takes SIGCHLD and the rest from a signalfd, and a
  // thread with them unblocked would swallow them. Detached: a write
  // blocked on a reader that never reads again must not hold up the exit;
  // the state lives as long as the thread needs it.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  std::thread{[s = state_] { s->run(); }}.detach();
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

output_sink::~output_sink() {
  std::unique_lock<std::mutex> lock(state_->mtx);
  state_->stopping = true;
  state_->changed.notify_all();
  state_->changed.wait_for(lock, drain_time, [&] {
    return state_->queue.empty() && !state_->writing;
  });
}

void output_sink::write(std::string_view text) {
  std::lock_guard<std::mutex> lock(state_->mtx);
  auto& queue = state_->queue;
  if (state_->queued_bytes + text.size() > state_->bound) {
    ++state_->dropped;
    if (queue.empty() || queue.back().dropped == 0)
      queue.push_back({});
    ++queue.back().dropped;
    state_->changed.notify_all();
    return;
  }
  queue.push_back({std::string(text), 0});
  state_->queued_bytes += text.size();
  state_->changed.notify_all();
}

size_t output_sink::dropped() const {
  std::lock_guard<std::mutex> lock(state_->mtx);
  return state_->dropped;
}

} // namespace troupe::elastic::launcher
