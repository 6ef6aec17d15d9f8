// Runs under troupe-run (or alone, as one rank) and checks collectives
// against a reference every rank computes from all ranks' seeded inputs.
//   collective_check ops        every op x dtype, per-rank random order
//   collective_check many N     N small allreduces in flight at once
//   collective_check lose-peer kill|stop|stop-busy VICTIM STAMP_FILE
//                               VICTIM dies (SIGKILL) or freezes (SIGSTOP)
//                               while the others wait on a collective (at the
//                               coordinator, or inside the backend for
//                               stop-busy); they report how fast and with
//                               what error they failed
// Prints "rank R: PASS ..." per rank; exit 0 on success.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "troupe/troupe.hpp"

namespace {

using troupe::data_type;

constexpr unsigned seed = 99;

// Integer-valued doubles keep float sums exact whatever the order.
double value(unsigned tensor, int rank, size_t i) {
  std::mt19937 gen(seed + tensor * 131 + static_cast<unsigned>(rank) * 7919 +
                   static_cast<unsigned>(i));
  return static_cast<double>(static_cast<int>(gen() % 201) - 100);
}

struct buffer {
  data_type dtype;
  std::vector<char> bytes;

  buffer(data_type t, size_t n) : dtype(t), bytes(n * troupe::element_size(t)) {}

  size_t count() const { return bytes.size() / troupe::element_size(dtype); }

  void set(size_t i, double v) {
    switch (dtype) {
      case data_type::float32: reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>(v); break;
      case data_type::float64: reinterpret_cast<double*>(bytes.data())[i] = v; break;
      case data_type::int32: reinterpret_cast<int32_t*>(bytes.data())[i] = static_cast<int32_t>(v); break;
      default: reinterpret_cast<int64_t*>(bytes.data())[i] = static_cast<int64_t>(v); break;
    }
  }

  double get(size_t i) const {
    switch (dtype) {
      case data_type::float32: return reinterpret_cast<const float*>(bytes.data())[i];
      case data_type::float64: return reinterpret_cast<const double*>(bytes.data())[i];
      case data_type::int32: return reinterpret_cast<const int32_t*>(bytes.data())[i];
      default: return static_cast<double>(reinterpret_cast<const int64_t*>(bytes.data())[i]);
    }
  }
};

bool is_integer(data_type t) {
  return t == data_type::int32 || t == data_type::int64;
}

// One collective: submits, then checks its own result.
struct check {
  std::string name;
  std::function<troupe::handle()> submit;
  std::function<std::string(const troupe::handle&)> verify;  // "" = ok
};

std::vector<check> make_checks(int rank, int size) {
  std::vector<check> checks;
  const data_type dtypes[] = {data_type::float32, data_type::float64, data_type::int32,
                              data_type::int64};
  unsigned id = 0;
  for (auto dtype : dtypes) {
    for (auto op : {troupe::reduce_op::sum, troupe::reduce_op::average}) {
      ++id;
      const size_t n = 1 + id * 37;
      auto in = std::make_shared<buffer>(dtype, n);
      auto out = std::make_shared<buffer>(dtype, n);
      for (size_t i = 0; i < n; ++i)
        in->set(i, value(id, rank, i));
      const std::string name = std::string("allreduce.") + troupe::to_string(dtype) + "." +
                               troupe::to_string(op);
      checks.push_back({name,
                        [=] {
                          return troupe::allreduce(
                            {in->bytes.data(), dtype, {static_cast<int64_t>(n)}},
                            {out->bytes.data(), dtype, {static_cast<int64_t>(n)}}, name, op);
                        },
                        [=](const troupe::handle&) -> std::string {
                          for (size_t i = 0; i < n; ++i) {
                            double sum = 0;
                            for (int r = 0; r < size; ++r)
                              sum += value(id, r, i);
                            double want = sum;
                            if (op == troupe::reduce_op::average)
                              want = is_integer(dtype) ? static_cast<double>(
                                                           static_cast<int64_t>(sum) / size)
                                                       : sum / size;
                            if (std::abs(out->get(i) - want) > 1e-4 * (1 + std::abs(want)))
                              return "element " + std::to_string(i) + " is " +
                                     std::to_string(out->get(i)) + ", want " +
                                     std::to_string(want);
                          }
                          return {};
                        }});
    }
    // Allgather: rank r sends r + 1 rows of 2 columns.
    ++id;
    auto in = std::make_shared<buffer>(dtype, static_cast<size_t>((rank + 1) * 2));
    for (size_t i = 0; i < in->count(); ++i)
      in->set(i, value(id, rank, i));
    const std::string gname = std::string("allgather.") + troupe::to_string(dtype);
    checks.push_back(
      {gname,
       [=] {
         return troupe::allgather({in->bytes.data(), dtype, {rank + 1, 2}}, gname);
       },
       [=](const troupe::handle& h) -> std::string {
         const int64_t rows = static_cast<int64_t>(size) * (size + 1) / 2;
         if (h.output_shape() != troupe::shape_t{rows, 2})
           return "shape " + troupe::to_string(h.output_shape());
         buffer got(dtype, static_cast<size_t>(rows * 2));
         got.bytes = h.output();
         size_t k = 0;
         for (int r = 0; r < size; ++r)
           for (size_t i = 0; i < static_cast<size_t>((r + 1) * 2); ++i, ++k)
             if (got.get(k) != value(id, r, i))
               return "element " + std::to_string(k);
         return {};
       }});
    // Broadcast from every root.
    for (int root = 0; root < size; ++root) {
      ++id;
      auto data = std::make_shared<buffer>(dtype, 19);
      for (size_t i = 0; i < 19; ++i)
        data->set(i, value(id, rank, i));
      const std::string bname = std::string("broadcast.") + troupe::to_string(dtype) +
                                ".root" + std::to_string(root);
      checks.push_back({bname,
                        [=] { return troupe::broadcast({data->bytes.data(), dtype, {19}},
                                                       root, bname); },
                        [=](const troupe::handle&) -> std::string {
                          for (size_t i = 0; i < 19; ++i)
                            if (data->get(i) != value(id, root, i))
                              return "element " + std::to_string(i);
                          return {};
                        }});
    }
  }
  return checks;
}

int run_checks(std::vector<check> checks, int rank, const char* what) {
  // Each rank submits in its own random order; the coordinator's order wins.
  std::mt19937 gen(1234 + static_cast<unsigned>(rank));
  std::shuffle(checks.begin(), checks.end(), gen);
  std::vector<troupe::handle> handles;
  for (auto& c : checks)
    handles.push_back(c.submit());
  int failures = 0;
  for (size_t i = 0; i < checks.size(); ++i) {
    auto s = handles[i].wait();
    std::string problem = s.ok() ? checks[i].verify(handles[i]) : s.message();
    if (!problem.empty()) {
      ++failures;
      std::printf("rank %d: FAIL %s: %s\n", rank, checks[i].name.c_str(), problem.c_str());
    }
  }
  if (failures == 0)
    std::printf("rank %d: PASS %zu %s\n", rank, checks.size(), what);
  return failures == 0 ? 0 : 1;
}

std::vector<check> many_small(int rank, int size, int count) {
  std::vector<check> checks;
  for (int t = 0; t < count; ++t) {
    auto v = std::make_shared<std::vector<float>>(4);
    for (size_t i = 0; i < 4; ++i)
      (*v)[i] = static_cast<float>(value(static_cast<unsigned>(t), rank, i));
    const std::string name = "small." + std::to_string(t);
    checks.push_back({name,
                      [=] {
                        return troupe::allreduce({v->data(), data_type::float32, {4}},
                                                 {v->data(), data_type::float32, {4}}, name);
                      },
                      [=](const troupe::handle&) -> std::string {
                        for (size_t i = 0; i < 4; ++i) {
                          double want = 0;
                          for (int r = 0; r < size; ++r)
                            want += value(static_cast<unsigned>(t), r, i);
                          if ((*v)[i] != static_cast<float>(want))
                            return "element " + std::to_string(i);
                        }
                        return {};
                      }});
  }
  return checks;
}

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int lose_peer(int rank, const std::string& how, int victim, const std::string& stamp_file) {
  // troupe-run stops the survivors once the victim is gone; let them report.
  std::signal(SIGTERM, SIG_IGN);
  float x = 1;
  auto warm = troupe::allreduce({&x, data_type::float32, {1}}, {&x, data_type::float32, {1}},
                                "warm-up");
  // "stop-busy": the victim joins a large allreduce and freezes, so the
  // others are blocked inside the backend. Otherwise the victim never
  // submits it and the others wait at the coordinator.
  const bool busy = how == "stop-busy";
  std::vector<float> big(busy ? 16u << 20 : 1u, 1.0f);
  const troupe::tensor t{big.data(), data_type::float32, {static_cast<int64_t>(big.size())}};
  if (rank == victim) {
    if (!warm.wait().ok())
      return 1;
    if (busy) {
      auto h = troupe::allreduce(t, t, "big");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::ofstream(stamp_file) << std::to_string(now_seconds()) << "\n";
    std::raise(how == "kill" ? SIGKILL : SIGSTOP);
    return 0;
  }
  // The victim may die before this rank saw the warm-up complete; then the
  // warm-up is the collective that must fail.
  auto s = warm.wait();
  if (s.ok())
    s = troupe::allreduce(t, t, busy ? "big" : "never-completes")
          .wait_for(std::chrono::seconds(30));
  const double detected = now_seconds();
  double stamped = 0;
  std::ifstream(stamp_file) >> stamped;
  const bool names_victim =
    s.message().find("rank " + std::to_string(victim)) != std::string::npos;
  std::printf("rank %d: %s after %.3f s (%s): %s\n", rank,
              s.code() == troupe::status_code::peer_lost && names_victim ? "DETECTED"
                                                                          : "NOT-DETECTED",
              detected - stamped, troupe::to_string(s.code()), s.message().c_str());
  std::fflush(stdout);
  // A training script would now end; the job's launcher reaps the rest.
  troupe::shutdown();
  return 3;
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ops";
  if (auto s = troupe::init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.message().c_str());
    return 1;
  }
  const int rank = troupe::rank();
  const int size = troupe::size();
  int rc = 2;
  if (mode == "ops")
    rc = run_checks(make_checks(rank, size), rank, "collectives");
  else if (mode == "many")
    rc = run_checks(many_small(rank, size, argc > 2 ? std::atoi(argv[2]) : 1000), rank,
                    "small allreduces in flight");
  else if (mode == "lose-peer" && argc == 5)
    rc = lose_peer(rank, argv[2], std::atoi(argv[3]), argv[4]);
  else
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  std::fflush(stdout);
  troupe::shutdown();
  return rc;
}
