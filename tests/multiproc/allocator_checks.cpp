#include "allocator_checks.hpp"

#include <atomic>
#include <memory>

namespace troupe::test {

namespace {

// What one output_allocator was asked for, and the memory it handed out.
struct allocation {
  std::atomic<int> calls{0};
  shape_t shape;
  std::vector<char> bytes;

  output_allocator allocator(data_type t) {
    return [this, t](const shape_t& s) -> void* {
      ++calls;
      shape = s;
      bytes.resize(static_cast<size_t>(num_elements(s)) * element_size(t));
      return bytes.empty() ? nullptr : bytes.data();
    };
  }
};

using allocation_ptr = std::shared_ptr<allocation>;

// "" when `a` was called once for `want_shape`, the handle kept no bytes of
// its own, and element i of the result is want(i).
template <class T, class F>
std::string verify(const handle& h, const allocation& a, const shape_t& want_shape, F want) {
  if (auto s = h.result(); !s.ok())
    return "failed: " + s.message();
  if (a.calls != 1)
    return "allocator called " + std::to_string(a.calls) + " times";
  if (a.shape != want_shape || h.output_shape() != want_shape)
    return "allocated " + to_string(a.shape) + ", handle says " + to_string(h.output_shape()) +
           ", want " + to_string(want_shape);
  if (!h.output().empty())
    return "the handle holds " + std::to_string(h.output().size()) + " bytes too";
  const auto* got = reinterpret_cast<const T*>(a.bytes.data());
  for (size_t i = 0; i < static_cast<size_t>(num_elements(want_shape)); ++i)
    if (got[i] != want(i))
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
             std::to_string(want(i));
  return {};
}

// Allgather of `rows_of(r)` rows of two int32 per rank r: 1000 r + 10 row + col.
check gathered(const std::string& name, int rank, int size,
               const std::function<int64_t(int)>& rows_of) {
  auto input = std::make_shared<std::vector<int32_t>>();
  for (int64_t row = 0; row < rows_of(rank); ++row)
    for (int col = 0; col < 2; ++col)
      input->push_back(static_cast<int32_t>(1000 * rank + 10 * row + col));
  auto a = std::make_shared<allocation>();
  std::vector<int32_t> want;
  for (int r = 0; r < size; ++r)
    for (int64_t row = 0; row < rows_of(r); ++row)
      for (int col = 0; col < 2; ++col)
        want.push_back(static_cast<int32_t>(1000 * r + 10 * row + col));
  const shape_t want_shape{static_cast<int64_t>(want.size() / 2), 2};
  return {name,
          [=] {
            return allgather({input->data(), data_type::int32, {rows_of(rank), 2}}, name, {},
                             a->allocator(data_type::int32));
          },
          [=](const handle& h) {
            return verify<int32_t>(h, *a, want_shape, [&](size_t i) { return want[i]; });
          }};
}

// Alltoall: rank r sends (r + d) % 3 rows of two int32 to rank d.
check exchanged(int rank, int size) {
  auto rows_to = [](int from, int to) { return static_cast<int64_t>((from + to) % 3); };
  auto input = std::make_shared<std::vector<int32_t>>();
  std::vector<int64_t> splits;
  for (int d = 0; d < size; ++d) {
    splits.push_back(rows_to(rank, d));
    for (int64_t row = 0; row < rows_to(rank, d); ++row)
      for (int col = 0; col < 2; ++col)
        input->push_back(static_cast<int32_t>(10000 * rank + 100 * d + 10 * row + col));
  }
  std::vector<int32_t> want;
  std::vector<int64_t> want_splits;
  for (int s = 0; s < size; ++s) {
    want_splits.push_back(rows_to(s, rank));
    for (int64_t row = 0; row < rows_to(s, rank); ++row)
      for (int col = 0; col < 2; ++col)
        want.push_back(static_cast<int32_t>(10000 * s + 100 * rank + 10 * row + col));
  }
  auto a = std::make_shared<allocation>();
  const int64_t rows = static_cast<int64_t>(input->size() / 2);
  return {"alltoall.allocated",
          [=] {
            return alltoall({input->data(), data_type::int32, {rows, 2}}, "alloc.alltoall",
                            splits, {}, a->allocator(data_type::int32));
          },
          [=](const handle& h) {
            if (h.received_splits() != want_splits)
              return std::string("received splits differ");
            return verify<int32_t>(h, *a, {static_cast<int64_t>(want.size() / 2), 2},
                                   [&](size_t i) { return want[i]; });
          }};
}

// Reducescatter (sum) of 2 size + 1 rows of `cols` float32 (3 unless
// said), rank r adding r + 1 + 10 row + col: exact in float32.
struct scattered {
  std::shared_ptr<std::vector<float>> input;
  shape_t mine;   // this rank's block
  int64_t first;  // its first row
  int64_t cols;

  scattered(int rank, int size, int64_t columns = 3)
    : input(std::make_shared<std::vector<float>>()), cols(columns) {
    const int64_t rows = 2 * size + 1;
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t col = 0; col < cols; ++col)
        input->push_back(static_cast<float>(rank + 1 + 10 * row + col));
    // Horovod's split: the first rows % size ranks get one row more.
    auto rows_of = [&](int r) { return rows / size + (r < rows % size ? 1 : 0); };
    first = 0;
    for (int r = 0; r < rank; ++r)
      first += rows_of(r);
    mine = {rows_of(rank), cols};
  }

  tensor in() const {
    return {input->data(), data_type::float32,
            {static_cast<int64_t>(input->size()) / cols, cols}};
  }

  float want(int size, size_t i) const {
    const auto row = first + static_cast<int64_t>(i) / cols;
    const auto col = static_cast<int64_t>(i) % cols;
    return static_cast<float>(size * (10 * row + col) + size * (size + 1) / 2);
  }
};

check reduced(int rank, int size) {
  const scattered x(rank, size);
  auto a = std::make_shared<allocation>();
  return {"reducescatter.allocated",
          [=] {
            return reducescatter(x.in(), "alloc.rs", reduce_op::sum, 1.0, 1.0, {},
                                 a->allocator(data_type::float32));
          },
          [=](const handle& h) {
            return verify<float>(h, *a, x.mine, [&](size_t i) { return x.want(size, i); });
          }};
}

// An allocator that hands out the end of the input's own memory, which the
// reduction reads in later rounds (rows of 60 000 floats: several rounds of
// the host's segment): the result must still be the sum.
check reduced_into_input(int rank, int size) {
  const scattered x(rank, size, 60000);
  return {"reducescatter.into_its_input",
          [=] {
            return reducescatter(x.in(), "alloc.rs_in", reduce_op::sum, 1.0, 1.0, {},
                                 [=](const shape_t& s) -> void* {
                                   return x.input->data() + x.input->size() -
                                          static_cast<size_t>(num_elements(s));
                                 });
          },
          [=](const handle& h) -> std::string {
            if (auto s = h.result(); !s.ok())
              return "failed: " + s.message();
            if (h.output_shape() != x.mine)
              return "shape " + to_string(h.output_shape());
            const auto n = static_cast<size_t>(num_elements(x.mine));
            const float* got = x.input->data() + x.input->size() - n;
            for (size_t i = 0; i < n; ++i)
              if (got[i] != x.want(size, i))
                return "element " + std::to_string(i) + ": " + std::to_string(got[i]) +
                       ", want " + std::to_string(x.want(size, i));
            return std::string();
          }};
}

// Fewer rows than ranks, each of 40 000 floats (past a one-exchange
// reduce-scatter's 64 KiB): the last rank's part is empty.
check reduced_with_an_empty_part(int rank, int size) {
  auto input = std::make_shared<std::vector<float>>();
  const int64_t rows = size - 1, cols = 40000;
  for (int64_t i = 0; i < rows * cols; ++i)
    input->push_back(static_cast<float>(rank + 1 + i % 1000));
  auto a = std::make_shared<allocation>();
  const shape_t mine{rank < rows ? 1 : 0, cols};
  return {"reducescatter.allocated.empty_part",
          [=] {
            return reducescatter({input->data(), data_type::float32, {rows, cols}}, "alloc.rs_e",
                                 reduce_op::sum, 1.0, 1.0, {}, a->allocator(data_type::float32));
          },
          [=](const handle& h) {
            return verify<float>(h, *a, mine, [&](size_t i) {
              const auto at = static_cast<int64_t>(rank) * cols + static_cast<int64_t>(i);
              return static_cast<float>(size * (1 + at % 1000) + size * (size - 1) / 2);
            });
          }};
}

// Several members, each with its own allocator: `run` submits them as one
// group; every member must pass `verify_member`.
check grouped(const std::string& name, size_t members,
              std::function<std::vector<handle>(const std::vector<output_allocator>&)> run,
              std::function<std::string(size_t, const handle&, const allocation&)> verify_member) {
  auto as = std::make_shared<std::vector<allocation_ptr>>();
  for (size_t m = 0; m < members; ++m)
    as->push_back(std::make_shared<allocation>());
  auto handles = std::make_shared<std::vector<handle>>();
  return {name,
          [=] {
            std::vector<output_allocator> allocators;
            for (const auto& a : *as)
              allocators.push_back(a->allocator(data_type::int32));
            *handles = run(allocators);
            return handles->front();
          },
          [=](const handle&) {
            for (size_t m = 0; m < members; ++m) {
              (*handles)[m].wait();
              if (auto err = verify_member(m, (*handles)[m], *(*as)[m]); !err.empty())
                return "member " + std::to_string(m) + ": " + err;
            }
            return std::string();
          }};
}

} // namespace

std::vector<check> allocator_checks(int rank, int size) {
  std::vector<check> out;
  out.push_back(gathered("allgather.allocated", rank, size, [](int r) { return r % 3; }));
  out.push_back(gathered("allgather.allocated.empty", rank, size, [](int) { return 0; }));
  out.push_back(exchanged(rank, size));
  out.push_back(reduced(rank, size));
  out.push_back(reduced_into_input(rank, size));
  if (size > 1)
    out.push_back(reduced_with_an_empty_part(rank, size));

  // Three int32 members of one group: fused into one allgather.
  auto inputs = std::make_shared<std::vector<std::vector<int32_t>>>();
  for (int m = 0; m < 3; ++m)
    inputs->push_back(std::vector<int32_t>(static_cast<size_t>(m + 1), 100 * rank + m));
  out.push_back(grouped(
    "grouped_allgather.allocated", 3,
    [=](const std::vector<output_allocator>& allocators) {
      std::vector<tensor> ts;
      for (auto& in : *inputs)
        ts.push_back({in.data(), data_type::int32, {static_cast<int64_t>(in.size())}});
      return grouped_allgather(ts, "alloc.gag", {}, allocators);
    },
    [=](size_t m, const handle& h, const allocation& a) {
      const auto n = static_cast<int64_t>(m + 1);
      return verify<int32_t>(h, a, {n * size}, [&](size_t i) {
        return static_cast<int32_t>(100 * (static_cast<int64_t>(i) / n) + static_cast<int64_t>(m));
      });
    }));

  const scattered x(rank, size);
  auto as_int = std::make_shared<std::vector<std::vector<int32_t>>>();
  for (int m = 0; m < 2; ++m)
    as_int->push_back(std::vector<int32_t>(x.input->begin(), x.input->end()));
  out.push_back(grouped(
    "grouped_reducescatter.allocated", 2,
    [=](const std::vector<output_allocator>& allocators) {
      std::vector<tensor> ts;
      for (auto& in : *as_int)
        ts.push_back({in.data(), data_type::int32, x.in().shape});
      return grouped_reducescatter(ts, "alloc.grs", reduce_op::sum, 1.0, 1.0, {}, allocators);
    },
    [=](size_t, const handle& h, const allocation& a) {
      return verify<int32_t>(h, a, x.mine,
                             [&](size_t i) { return static_cast<int32_t>(x.want(size, i)); });
    }));

  return out;
}

} // namespace troupe::test
