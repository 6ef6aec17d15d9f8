#include "elastic/launcher_beacon.hpp"

#include "elastic/store.hpp"

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace troupe::elastic {

namespace {

constexpr std::chrono::seconds renew_every{1};

} // namespace

std::string launcher_key(const std::string& job) {
  return job + "/launcher";
}

struct launcher_beacon::state {
  std::unique_ptr<store_client> store;
  std::string key;
  std::mutex mtx;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  void run() {
    std::unique_lock<std::mutex> lock{mtx};
    while (!wake.wait_for(lock, renew_every, [this] { return stop; })) {
      lock.unlock();
      try {
        // Absent: the lease ran out while etcd was out of reach.
        if (!store->renew(key, launcher_lease))
          store->set_with_lease(key, "", launcher_lease);
      } catch (const store_error& e) {
        std::fprintf(stderr, "troupe-run: warning: cannot renew %s: %s\n", key.c_str(), e.what());
      }
      lock.lock();
    }
  }
};

launcher_beacon::launcher_beacon(std::unique_ptr<store_client> store, const std::string& job)
  : state_(std::make_unique<state>()) {
  state_->store = std::move(store);
  state_->key = launcher_key(job);
  state_->store->set_with_lease(state_->key, "", launcher_lease);
  state_->thread = std::thread{[s = state_.get()] { s->run(); }};
}

launcher_beacon::~launcher_beacon() {
  {
    std::lock_guard<std::mutex> guard{state_->mtx};
    state_->stop = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
  try {
    state_->store->remove(state_->key);
  } catch (const store_error&) {
    // The lease removes it soon enough.
  }
}

} // namespace troupe::elastic
