#include "process_set_checks.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "expect.hpp"
#include "resource_counts.hpp"
#include "troupe/troupe.hpp"

namespace troupe::test {

namespace {

// Allreduce (sum) of each member's global rank on `set`, checked.
handle rank_sum(const process_set& set, const std::string& name, float& x) {
  x = static_cast<float>(troupe::rank());
  return allreduce({&x, data_type::float32, {1}}, {&x, data_type::float32, {1}}, name,
                   reduce_op::sum, 1.0, 1.0, set);
}

float members_sum(const process_set& set) {
  float sum = 0;
  for (auto r : set.ranks)
    sum += static_cast<float>(r);
  return sum;
}

void even_odd(int rank) {
  // Horovod's process-set example: two concurrent allreduces, one per set.
  process_set even{1, {0, 2}}, odd{2, {1, 3}};
  const auto& mine = rank % 2 == 0 ? even : odd;
  expect(mine.included() && mine.rank() == rank / 2 && mine.size() == 2, rank, "set identity");
  expect(even.to_string() == "ProcessSet(process_set_id=1, ranks=[0, 2], mpi_comm=None)", rank,
         "printed form: " + even.to_string());
  std::vector<float> x(20);
  std::vector<handle> hs;
  for (int i = 0; i < 20; ++i)
    hs.push_back(rank_sum(mine, "even_odd." + std::to_string(i), x[static_cast<size_t>(i)]));
  for (int i = 0; i < 20; ++i)
    expect(hs[static_cast<size_t>(i)].wait().ok() &&
             x[static_cast<size_t>(i)] == members_sum(mine),
           rank, "even/odd allreduce " + std::to_string(i));
}

void overlapping(int rank) {
  process_set front;
  auto s = add_process_set({2, 1, 0}, front);
  expect(s.ok() && front.id == 3 && front.ranks == std::vector<int>{0, 1, 2}, rank,
         "add [2, 1, 0] -> id 3: " + s.message());
  process_set pair{rank % 2 == 0 ? 1 : 2, rank % 2 == 0 ? std::vector<int>{0, 2}
                                                         : std::vector<int>{1, 3}};
  float a = 0, b = 0;
  handle ha, hb;
  if (front.included())
    ha = rank_sum(front, "overlap.front", a);
  hb = rank_sum(pair, "overlap.pair", b);
  if (front.included())
    expect(ha.wait().ok() && a == 3, rank, "overlapping set [0, 1, 2]");
  expect(hb.wait().ok() && b == members_sum(pair), rank, "overlapping even/odd set");
  // Broadcast roots are global ranks.
  float v = static_cast<float>(rank);
  if (front.included())
    expect(broadcast({&v, data_type::float32, {1}}, 2, "bcast.front", front).wait().ok() &&
             v == 2,
           rank, "broadcast from global rank 2 on [0, 1, 2]");
  expect(remove_process_set(front).ok(), rank, "remove id 3");
}

void errors(int rank) {
  float x = 1;
  const tensor t{&x, data_type::float32, {1}};
  process_set other{rank % 2 == 0 ? 2 : 1, rank % 2 == 0 ? std::vector<int>{1, 3}
                                                          : std::vector<int>{0, 2}};
  expect_error(allreduce(t, t, "foreign", reduce_op::sum, 1, 1, other).wait(),
               "Allreduce: Rank " + std::to_string(rank) +
                 " is not a member of the provided process set.",
               rank, "non-member");
  expect_error(allgather(t, "unknown", process_set{42, {0}}).wait(),
               "Allgather: Process set provided does not exist, or has not been registered.",
               rank, "unknown set");
  process_set even{1, {0, 2}};
  if (even.included())
    expect_error(broadcast(t, 1, "bad-root", even).wait(),
                 "broadcast received invalid root rank 1 for provided process set", rank,
                 "root outside the set");
  process_set ignored;
  expect_error(add_process_set({0, 0, 1}, ignored), "duplicate rank: 0", rank, "duplicate");
  expect_error(add_process_set({0, 9}, ignored), "invalid rank: 9", rank, "out of range");
  expect_error(add_process_set({0, 2}, ignored), "already registered", rank, "existing set");
  expect_error(add_process_set(rank == 0 ? std::vector<int>{0, 1} : std::vector<int>{0, 3},
                               ignored),
               "mismatching values on different ranks: rank 0 sent [0, 1], rank 1 sent [0, 3]",
               rank, "mismatched registration");
  expect_error(remove_process_set(global_process_set()), "cannot be removed", rank,
               "remove global");
  // Work pending on a set when it is removed fails instead of hanging.
  process_set duo;
  expect(add_process_set({0, 1}, duo).ok(), rank, "add [0, 1]");
  handle orphan;
  if (rank == 0)
    orphan = rank_sum(duo, "orphan", x);  // rank 1 never submits it
  expect(remove_process_set(duo).ok(), rank, "remove [0, 1]");
  if (rank == 0)
    expect_error(orphan.wait(), "Process set has been removed", rank, "pending on removal");
  expect_error(allreduce(t, t, "after-removal", reduce_op::sum, 1, 1, duo).wait(),
               "does not exist", rank, "op on a removed set");
}

void add_remove_loop(int rank) {
  // The first round of each set creates what lives as long as the process
  // (CAF, MPI) or the membership epoch (along a tree of control
  // connections, a member's connections to its set's coordinator and
  // parent).
  for (const auto& ranks : {std::vector<int>{1, 2}, std::vector<int>{0, 1, 3}}) {
    process_set warm;
    expect(add_process_set(ranks, warm).ok() && remove_process_set(warm).ok(), rank, "warm-up");
  }
  const auto before = settled_resources();
  for (int i = 0; i < 100 && failures() == 0; ++i) {
    process_set s;
    const std::vector<int> ranks = i % 2 ? std::vector<int>{1, 2} : std::vector<int>{0, 1, 3};
    expect(add_process_set(ranks, s).ok(), rank, "add round " + std::to_string(i));
    if (s.included()) {
      float x = 0;
      expect(rank_sum(s, "loop", x).wait().ok() && x == members_sum(s), rank,
             "allreduce round " + std::to_string(i));
    }
    expect(remove_process_set(s).ok(), rank, "remove round " + std::to_string(i));
  }
  const auto after = settled_resources();
  const auto text = "threads " + std::to_string(before.threads) + " -> " +
                    std::to_string(after.threads) + ", sockets " +
                    std::to_string(before.sockets) + " -> " + std::to_string(after.sockets);
  expect(after.threads <= before.threads && after.sockets <= before.sockets, rank,
         "leak after 100 add/remove rounds: " + text);
  std::printf("rank %d: %s over 100 add/remove rounds\n", rank, text.c_str());
}

} // namespace

int run_late_set_check(int rank, int size, double lateness) {
  using clock = std::chrono::steady_clock;
  const char* timeout_env = std::getenv("TROUPE_START_TIMEOUT");
  const double deadline = timeout_env ? std::atof(timeout_env) : 30.0;
  const bool expect_failure = lateness > deadline;
  const int late = size - 1;
  // Another thread keeps asking for this rank's identity all along.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> slowest_us{0};
  std::thread asker([&] {
    while (!stop) {
      const auto t0 = clock::now();
      const bool answered = troupe::rank() == rank && troupe::size() == size &&
                            troupe::is_initialized();
      const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - t0).count();
      if (!answered)
        slowest_us = INT64_MAX;
      else if (us > slowest_us)
        slowest_us = us;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  if (rank == late)
    std::this_thread::sleep_for(std::chrono::duration<double>(lateness));
  const auto t0 = clock::now();
  process_set set;
  const auto s = add_process_set({0, 1}, set);
  const double took = std::chrono::duration<double>(clock::now() - t0).count();
  stop = true;
  asker.join();
  std::printf("rank %d: add_process_set after %.1f s: %s; slowest rank() meanwhile %.3f ms\n",
              rank, took, s.ok() ? "ok" : s.message().c_str(),
              static_cast<double>(slowest_us) / 1000);
  expect(slowest_us < 10000, rank, "rank()/size()/is_initialized() took " +
                                     std::to_string(slowest_us.load()) + " us while waiting");
  if (expect_failure) {
    expect_error(s, "rank(s) " + std::to_string(late) + " ", rank, "late add_process_set");
    expect(rank == late || took < deadline + 3, rank,
           "the waiting ranks fail at the deadline, took " + std::to_string(took) + " s");
  } else {
    expect(s.ok(), rank, "add_process_set with a late rank: " + s.message());
    if (rank != late)
      expect(took >= lateness - 1, rank, "returned before the late rank called");
    if (s.ok())
      expect(remove_process_set(set).ok(), rank, "remove after the late add");
  }
  // The runtime keeps serving, and the ranks still agree on registrations.
  float x = 0;
  auto h = rank_sum(process_set{}, "after.late", x);
  expect(h.wait().ok() && x == static_cast<float>(size * (size - 1) / 2), rank,
         "allreduce after the late registration");
  process_set again;
  expect(add_process_set({0, 1}, again).ok() && remove_process_set(again).ok(), rank,
         "add/remove after the late registration");
  if (failures() == 0)
    std::printf("rank %d: PASS late add_process_set (%s)\n", rank,
                expect_failure ? "failed everywhere" : "succeeded");
  return failures() == 0 ? 0 : 1;
}

int run_process_set_checks(int rank, int size) {
  if (size != 4) {
    std::printf("rank %d: FAIL process-sets needs 4 ranks\n", rank);
    return 1;
  }
  even_odd(rank);
  overlapping(rank);
  errors(rank);
  add_remove_loop(rank);
  if (failures() == 0)
    std::printf("rank %d: PASS process sets\n", rank);
  return failures() == 0 ? 0 : 1;
}

int run_serialized_mpi_check(int rank) {
  const auto everyone = global_process_set();
  const float all = members_sum(everyone);
  float x = 0;
  expect(rank_sum(everyone, "serialized.before", x).wait().ok() && x == all, rank,
         "global allreduce before");
  process_set pair;
  // Its members say why; the other rank, where.
  expect_error(add_process_set({0, 1}, pair),
               rank < 2 ? "TROUPE_MPI_THREADS_DISABLE" : "did not start on rank(s) [0, 1]", rank,
               "a second set on MPI without MPI_THREAD_MULTIPLE");
  expect(remove_process_set(process_set{1, {0, 1}}).ok(), rank, "removing the refused set");
  expect(rank_sum(everyone, "serialized.after", x).wait().ok() && x == all, rank,
         "global allreduce after the refused set");
  if (failures() == 0)
    std::printf("rank %d: PASS serialized MPI\n", rank);
  return failures() == 0 ? 0 : 1;
}

} // namespace troupe::test
