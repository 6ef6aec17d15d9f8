#include "autotune_checks.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "troupe/troupe.hpp"

namespace troupe::test {

namespace {

// One allreduce of `count` elements: rank r contributes r + step + i at i.
struct pending {
  std::string name;
  std::shared_ptr<std::vector<float>> f32;
  std::shared_ptr<std::vector<int32_t>> i32;
  handle h;
};

pending submit(const process_set& set, const std::string& name, size_t count, bool floats,
               int rank, int step) {
  pending p{name, nullptr, nullptr, {}};
  if (floats) {
    p.f32 = std::make_shared<std::vector<float>>(count);
    for (size_t i = 0; i < count; ++i)
      (*p.f32)[i] = static_cast<float>(rank + step % 1000 + static_cast<int>(i % 1000));
    const tensor t{p.f32->data(), data_type::float32, {static_cast<int64_t>(count)}};
    p.h = allreduce(t, t, name, reduce_op::sum, 1.0, 1.0, set);
  } else {
    p.i32 = std::make_shared<std::vector<int32_t>>(count);
    for (size_t i = 0; i < count; ++i)
      (*p.i32)[i] = rank + step + static_cast<int32_t>(i);
    const tensor t{p.i32->data(), data_type::int32, {static_cast<int64_t>(count)}};
    p.h = allreduce(t, t, name, reduce_op::sum, 1.0, 1.0, set);
  }
  return p;
}

// "" when `p` holds the sum over `set`'s members.
std::string verify(const pending& p, const process_set& set, int step) {
  if (auto s = p.h.wait(); !s.ok())
    return s.message();
  const size_t n = p.f32 ? p.f32->size() : p.i32->size();
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r : set.ranks)
      want += p.f32 ? r + step % 1000 + static_cast<int>(i % 1000)
                    : r + step + static_cast<int>(i);
    const double got = p.f32 ? (*p.f32)[i] : (*p.i32)[i];
    if (got != want)
      return "element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " +
             std::to_string(want);
  }
  return "";
}

} // namespace

int run_autotune_set_checks(int rank, int size, int steps) {
  if (size != 3) {
    std::printf("rank %d: FAIL autotune sets need 3 ranks, not %d\n", rank, size);
    return 1;
  }
  const process_set small{1, {0, 1}}, large{2, {1, 2}};
  int failures = 0;
  for (int step = 0; step < steps && failures == 0; ++step) {
    std::vector<std::pair<pending, const process_set*>> work;
    if (small.included())
      for (int k = 0; k < 40; ++k)
        work.emplace_back(submit(small, "small." + std::to_string(k), 16, false, rank, step),
                          &small);
    if (large.included())
      for (int k = 0; k < 4; ++k)
        work.emplace_back(submit(large, "large." + std::to_string(k), 1 << 16, true, rank, step),
                          &large);
    for (auto& [p, set] : work)
      if (auto problem = verify(p, *set, step); !problem.empty()) {
        ++failures;
        std::printf("rank %d: FAIL step %d %s on set %d: %s\n", rank, step, p.name.c_str(),
                    set->id, problem.c_str());
      }
  }
  if (failures == 0)
    std::printf("rank %d: PASS %d steps on two tuned process sets\n", rank, steps);
  return failures == 0 ? 0 : 1;
}

} // namespace troupe::test
