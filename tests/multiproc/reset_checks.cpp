#include "reset_checks.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "resource_counts.hpp"
#include "expect.hpp"
#include "troupe/troupe.hpp"

namespace troupe::test {

namespace {

// Sum over the current world of every rank's (rank + 1) * scale.
bool checked_allreduce(const std::string& name, int rank, const process_set& set = {}) {
  const int me = troupe::rank();
  std::vector<double> x(3, static_cast<double>(me + 1));
  auto h = allreduce({x.data(), data_type::float64, {3}}, {x.data(), data_type::float64, {3}},
                     name, reduce_op::sum, 1.0, 1.0, set);
  const auto s = h.wait();
  double want = 0;
  const auto& members = set.ranks.empty() ? global_process_set().ranks : set.ranks;
  for (auto r : members)
    want += r + 1;
  const bool ok = s.ok() && x[0] == want && x[2] == want;
  expect(ok, rank, name + ": " + (s.ok() ? "got " + std::to_string(x[0]) +
                                             ", want " + std::to_string(want)
                                         : s.message()));
  return ok;
}

// Every rank's epoch, gathered on the current world.
std::vector<int64_t> epochs_everywhere() {
  int64_t mine = troupe::epoch();
  auto h = allgather({&mine, data_type::int64, {1}}, "reset.epochs");
  if (!h.wait().ok())
    return {};
  std::vector<int64_t> all(h.output().size() / sizeof(int64_t));
  std::memcpy(all.data(), h.output().data(), h.output().size());
  return all;
}

} // namespace

int run_reset_checks(int rank, int size, int rounds) {
  const int warm_up = 3;  // the first resets create what lives as long as the process
  resource_counts before;
  for (int i = 0; i < warm_up + rounds && failures() == 0; ++i) {
    if (i == warm_up)
      before = settled_resources();
    const auto start = troupe::epoch();
    // Now and then a reset overtakes a collective still running: its handle
    // must complete (ok, or the retryable reset), never hang.
    std::vector<float> running;
    handle in_flight;
    if (i % 25 == 0) {
      running.assign(4u << 20, 1.0f);
      const tensor t{running.data(), data_type::float32, {static_cast<int64_t>(running.size())}};
      in_flight = allreduce(t, t, "running." + std::to_string(i));
    }
    const auto s = reset();
    if (in_flight.valid()) {
      const auto r = in_flight.wait_for(std::chrono::seconds(30));
      expect(r.ok() || r.code() == status_code::reset || r.code() == status_code::peer_lost ||
               r.code() == status_code::shut_down,
             rank, "collective overtaken by reset " + std::to_string(i) + ": " + r.message());
    }
    expect(s.ok(), rank, "reset " + std::to_string(i) + ": " + s.message());
    expect(troupe::epoch() == start + 1, rank,
           "epoch " + std::to_string(troupe::epoch()) + " after reset from " +
             std::to_string(start));
    expect(troupe::rank() == rank && troupe::size() == size, rank, "same world after reset");
    checked_allreduce("reset.check", rank);
    const auto epochs = epochs_everywhere();
    expect(epochs == std::vector<int64_t>(static_cast<size_t>(size), troupe::epoch()), rank,
           "every rank reports epoch " + std::to_string(troupe::epoch()));
    process_set set;
    // A set that is not the whole world: one rank, or the first and last.
    const std::vector<int> members = size > 2 && i % 2 ? std::vector<int>{0, size - 1}
                                                       : std::vector<int>{i % size};
    const auto added = add_process_set(members, set);
    expect(added.ok(), rank, "add_process_set after reset: " + added.message());
    if (set.included())
      checked_allreduce("reset.set", rank, set);
    const auto removed = remove_process_set(set);
    expect(removed.ok(), rank, "remove_process_set after reset: " + removed.message());
  }
  const auto after = back_within(before, std::chrono::seconds(15));
  const auto text = "threads " + std::to_string(before.threads) + " -> " +
                    std::to_string(after.threads) + ", fds " + std::to_string(before.fds) +
                    " -> " + std::to_string(after.fds) + ", sockets " +
                    std::to_string(before.sockets) + " -> " + std::to_string(after.sockets);
  expect(after.within(before), rank, "leak over " + std::to_string(rounds) + " resets: " + text);
  if (failures() == 0)
    std::printf("rank %d: PASS %d in-place resets, epoch %lld everywhere; %s\n", rank, rounds,
                static_cast<long long>(troupe::epoch()), text.c_str());
  return failures() == 0 ? 0 : 1;
}

int run_reset_after_loss(int rank, int size, int victim) {
  // troupe-run stops the survivors once the victim is gone (SIGTERM, then
  // SIGKILL after its grace period): they reset and check meanwhile.
  std::signal(SIGTERM, SIG_IGN);
  checked_allreduce("warm-up", rank);
  std::vector<float> big(64u << 20, 1.0f);  // 256 MiB
  const tensor t{big.data(), data_type::float32, {static_cast<int64_t>(big.size())}};
  auto h = allreduce(t, t, "big");
  if (rank == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::raise(SIGKILL);
  }
  const auto lost = h.wait();
  // The handle completed, so the backend let go of the buffer: free it at
  // once (an AddressSanitizer build reports any later access).
  big = std::vector<float>();
  expect(!lost.ok() && lost.code() != status_code::invalid_argument, rank,
         "the allreduce with the lost rank must fail retryably, got '" + lost.message() + "'");
  const auto t0 = std::chrono::steady_clock::now();
  const auto s = reset();
  const double took =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect(s.ok(), rank, "reset after the loss: " + s.message());
  const int want_rank = rank < victim ? rank : rank - 1;
  expect(troupe::size() == size - 1 && troupe::rank() == want_rank, rank,
         "new world: rank " + std::to_string(troupe::rank()) + " of " +
           std::to_string(troupe::size()));
  checked_allreduce("after.reset", rank);
  if (failures() == 0)
    std::printf("rank %d: PASS lost rank %d (%s), reset in %.3f s to rank %d of %d, epoch %lld\n",
                rank, victim, to_string(lost.code()), took, troupe::rank(), troupe::size(),
                static_cast<long long>(troupe::epoch()));
  std::fflush(stdout);
  return failures() == 0 ? 0 : 1;
}

} // namespace troupe::test
