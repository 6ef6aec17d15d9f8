// tune_reset_check MODE: settings an application set (troupe::tune) outlive
// resets. Run with troupe-run --autotune and an autotune log on 3 ranks;
// rank 2 alone sets every setting the tuner searches at its first step, so
// each epoch's tuner stops at once, its CSV's one row the settings in force
// (tune_reset.sh checks each epoch's CSV).
//   explicit     every rank resets twice (reset()); the new coordinator,
//                rank 0, never called tune().
//   loss         rank 0, the coordinator that pinned the settings, dies in
//                an allreduce; the survivors reset, and old rank 1, which
//                never called tune(), coordinates the new epoch.
//   setter_lost  rank 2, the one rank that called tune(), dies in an
//                allreduce; the survivors, which never called it, reset.
//   later_wins   after a few steps rank 0 gives the chunk another value
//                (8), in force from then on; every rank resets twice. Rank
//                2's earlier value must not come back.
// Each rank prints "rank R: PASS" when its checks held.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "expect.hpp"
#include "troupe/troupe.hpp"

namespace {

using troupe::test::expect;

constexpr int setter = 2;
constexpr int steps_per_epoch = 12;

// A training step: two allreduces whose names repeat every step (the tuner
// finds steps by that), each result checked.
void step(int rank) {
  const int me = troupe::rank();
  const int n = troupe::size();
  std::vector<float> a(1024, static_cast<float>(me + 1));
  std::vector<float> b(64, 1.0f);
  auto ha = troupe::allreduce({a.data(), troupe::data_type::float32, {1024}},
                              {a.data(), troupe::data_type::float32, {1024}}, "step.a");
  auto hb = troupe::allreduce({b.data(), troupe::data_type::float32, {64}},
                              {b.data(), troupe::data_type::float32, {64}}, "step.b");
  const auto sa = ha.wait();
  const auto sb = hb.wait();
  const float want_a = static_cast<float>(n * (n + 1) / 2);
  expect(sa.ok() && sb.ok() && a[0] == want_a && a[1023] == want_a &&
           b[63] == static_cast<float>(n),
         rank, "step allreduces: " + sa.message() + " " + sb.message());
}

void steps(int rank) {
  for (int i = 0; i < steps_per_epoch && troupe::test::failures() == 0; ++i)
    step(rank);
}

// Every setting the tuner searches; the CSV row "0,0,0,1,0,0,0,4".
troupe::tuning applications() {
  troupe::tuning t;
  t.fusion_threshold_bytes = 0;
  t.cycle_time_ms = 0;
  t.cache_capacity = 1024;
  t.fusion_chunk_bytes = 4;
  return t;
}

void reset_checked(int rank) {
  const auto s = troupe::reset();
  expect(s.ok(), rank, "reset: " + s.message());
}

void explicit_resets(int rank) {
  steps(rank);
  for (int r = 0; r < 2 && troupe::test::failures() == 0; ++r) {
    reset_checked(rank);
    steps(rank);
  }
}

void tune_checked(int rank, const troupe::tuning& t) {
  const auto s = troupe::tune(t);
  expect(s.ok(), rank, "tune: " + s.message());
}

// Rank 0 changes the chunk rank 2 set, later, then every rank resets.
void later_value(int rank) {
  steps(rank);
  if (rank == 0) {
    troupe::tuning t;
    t.fusion_chunk_bytes = 8;
    tune_checked(rank, t);
  }
  explicit_resets(rank);
}

// Rank `victim` dies in an allreduce; the survivors reset.
void lost_rank(int rank, int victim) {
  // troupe-run stops the survivors once the victim is gone (SIGTERM, then
  // SIGKILL after its grace period): they reset and check meanwhile.
  std::signal(SIGTERM, SIG_IGN);
  steps(rank);
  std::vector<float> big(16u << 20, 1.0f);
  const troupe::tensor t{big.data(), troupe::data_type::float32,
                         {static_cast<int64_t>(big.size())}};
  auto h = troupe::allreduce(t, t, "big");
  if (rank == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::raise(SIGKILL);
  }
  const auto lost = h.wait();
  big = std::vector<float>();
  expect(!lost.ok(), rank, "the allreduce with the lost rank must fail");
  reset_checked(rank);
  expect(troupe::size() == 2, rank, "2 survivors");
  steps(rank);
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "explicit" && mode != "loss" && mode != "setter_lost" && mode != "later_wins") {
    std::fprintf(stderr, "usage: tune_reset_check explicit|loss|setter_lost|later_wins\n");
    return 2;
  }
  if (auto s = troupe::init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.message().c_str());
    return 1;
  }
  const int rank = troupe::rank();
  if (rank == setter)
    tune_checked(rank, applications());
  if (mode == "explicit")
    explicit_resets(rank);
  else if (mode == "later_wins")
    later_value(rank);
  else
    lost_rank(rank, mode == "loss" ? 0 : setter);
  const bool ok = troupe::test::failures() == 0;
  std::printf("rank %d: %s %s\n", rank, ok ? "PASS" : "FAIL", mode.c_str());
  std::fflush(stdout);
  troupe::shutdown();
  return ok ? 0 : 1;
}
