#include "backends/cpu/collectives/adasum.hpp"

#include <array>
#include <vector>

namespace troupe::backends {

namespace {

// Below this squared norm a vector counts as zero and keeps coefficient 1
// (Horovod's guard against dividing by ~0).
constexpr double norm_epsilon = 1e-30;

struct segment {
  size_t offset;
  size_t length;
};

// Sums [dot, |left|^2, |right|^2] over the 2 * level ranks that hold the
// same pair of vectors, by recursive doubling; IEEE addition commutes, so
// every rank of the group ends with identical values.
void group_sum(const run_context& ctx, std::array<double, 3>& v, int level) {
  for (int distance = 1; distance <= level; distance <<= 1) {
    std::array<double, 3> theirs{};
    ctx.comm.sendrecv(v.data(), sizeof v, theirs.data(), sizeof theirs, ctx.rank ^ distance);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] += theirs[i];
  }
}

template <class T>
void adasum(const run_context& ctx, T* data, size_t count) {
  std::vector<T> received(count / 2 + 1);
  std::vector<segment> parents;
  segment mine{0, count};
  for (int level = 1; level < ctx.size; level <<= 1) {
    const int peer = ctx.rank ^ level;
    const bool upper = (ctx.rank & level) != 0;
    const size_t first = mine.length / 2;
    const segment lower_half{mine.offset, first};
    const segment upper_half{mine.offset + first, mine.length - first};
    const segment keep = upper ? upper_half : lower_half;
    const segment give = upper ? lower_half : upper_half;
    ctx.comm.sendrecv(data + give.offset, give.length * sizeof(T), received.data(),
                   keep.length * sizeof(T), peer);
    // "left" is always the lower group's vector, so both partners (and
    // the whole group) agree on which norm belongs to which vector.
    const T* left = upper ? received.data() : data + keep.offset;
    const T* right = upper ? data + keep.offset : received.data();
    std::array<double, 3> sums{};  // dot, |left|^2, |right|^2
    for (size_t i = 0; i < keep.length; ++i) {
      const double l = left[i], r = right[i];
      sums[0] += l * r;
      sums[1] += l * l;
      sums[2] += r * r;
    }
    group_sum(ctx, sums, level);
    const double lc = sums[1] >= norm_epsilon ? 1.0 - sums[0] / (2.0 * sums[1]) : 1.0;
    const double rc = sums[2] >= norm_epsilon ? 1.0 - sums[0] / (2.0 * sums[2]) : 1.0;
    T* out = data + keep.offset;
    for (size_t i = 0; i < keep.length; ++i)
      out[i] = static_cast<T>(lc * static_cast<double>(left[i]) +
                              rc * static_cast<double>(right[i]));
    parents.push_back(mine);
    mine = keep;
  }
  // Distance halving: swap finished halves until every rank has it all.
  for (int level = ctx.size / 2; level >= 1; level >>= 1) {
    const segment parent = parents.back();
    parents.pop_back();
    const bool upper = (ctx.rank & level) != 0;
    const size_t first = parent.length / 2;
    const segment other = upper ? segment{parent.offset, first}
                                : segment{parent.offset + first, parent.length - first};
    ctx.comm.sendrecv(data + mine.offset, mine.length * sizeof(T), data + other.offset,
                   other.length * sizeof(T), ctx.rank ^ level);
    mine = parent;
  }
}

} // namespace

void adasum_in_place(const run_context& ctx, void* data, size_t count, data_type dtype) {
  if ((ctx.size & (ctx.size - 1)) != 0)
    throw backend_error("Adasum needs a power-of-two number of ranks, not " +
                        std::to_string(ctx.size));
  if (dtype == data_type::float32)
    return adasum(ctx, static_cast<float*>(data), count);
  if (dtype == data_type::float64)
    return adasum(ctx, static_cast<double*>(data), count);
  throw backend_error(std::string("Adasum supports floating-point tensors, not ") +
                      to_string(dtype));
}

} // namespace troupe::backends
