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
//   elastic DIR  under troupe-run's elastic mode (tune_reset_elastic.sh):
//                rank 0 of epoch 0 sets every setting (the only rank to
//                call tune()); every worker steps until the ranks agree to
//                stop (the file DIR/stop), resetting whenever they agree
//                troupe-run changed the hosts. A worker the new epoch has
//                no place for passes when reset() says so. Each worker
//                prints "rank R: epoch E size S" on entering an epoch.
// Each rank prints "rank R: PASS" when its checks held.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
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

void say_epoch() {
  std::printf("rank %d: epoch %lld size %d\n", troupe::rank(),
              static_cast<long long>(troupe::epoch()), troupe::size());
  std::fflush(stdout);
}

// What any rank saw, agreed with an allreduce so that every rank acts on it
// at the same step: troupe-run changed the hosts, or the script asks to stop.
struct agreement {
  bool hosts_changed;
  bool stop;
};

agreement agree(const std::string& stop_file) {
  std::vector<int32_t> seen{troupe::hosts_updated() != troupe::host_update::none ? 1 : 0,
                            std::filesystem::exists(stop_file) ? 1 : 0};
  const troupe::tensor t{seen.data(), troupe::data_type::int32, {2}};
  const auto s = troupe::allreduce(t, t, "agree").wait();
  expect(s.ok(), troupe::rank(), "agree: " + s.message());
  return {seen[0] > 0, seen[1] > 0};
}

// Steps, resetting on every change of hosts, until the ranks agree to stop
// or reset() removes this worker; bounded by 90 s.
void elastic_run(const std::string& dir) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  say_epoch();
  while (troupe::test::failures() == 0) {
    expect(std::chrono::steady_clock::now() < deadline, troupe::rank(),
           "the job was not stopped within 90 s");
    step(troupe::rank());
    // Keeps the 2 to 4 workers from taking every core while they wait.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto agreed = agree(dir + "/stop");
    if (agreed.stop)
      return;
    if (!agreed.hosts_changed)
      continue;
    const int rank = troupe::rank();
    const auto s = troupe::reset();
    if (s.code() == troupe::status_code::removed) {
      std::printf("rank %d: removed\n", rank);
      return;
    }
    expect(s.ok(), rank, "reset: " + s.message());
    say_epoch();
  }
}

// Non-elastic modes: rank 2; elastic: rank 0 of the first epoch, never a
// newcomer (which gets rank 2 in the second).
bool sets_the_settings(const std::string& mode) {
  return mode == "elastic" ? troupe::epoch() == 0 && troupe::rank() == 0
                           : troupe::rank() == setter;
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "explicit" && mode != "loss" && mode != "setter_lost" && mode != "later_wins" &&
      (mode != "elastic" || argc < 3)) {
    std::fprintf(stderr,
                 "usage: tune_reset_check explicit|loss|setter_lost|later_wins|elastic DIR\n");
    return 2;
  }
  if (auto s = troupe::init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.message().c_str());
    return 1;
  }
  const int rank = troupe::rank();
  if (sets_the_settings(mode))
    tune_checked(rank, applications());
  if (mode == "elastic")
    elastic_run(argv[2]);
  else if (mode == "explicit")
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
