#include "proto/fusion.hpp"

#include <algorithm>

#include "proto/agreed_response.hpp"
#include "troupe/types.hpp"

namespace troupe {

namespace {

// Allreduces and reducescatters; Adasum's dot products and norms are per
// tensor, so its tensors run alone.
bool reduces_fusibly(v1::OpType op, v1::ReduceOp reduce_op) {
  return (op == v1::OP_TYPE_ALLREDUCE || op == v1::OP_TYPE_REDUCESCATTER) &&
         reduce_op != v1::REDUCE_OP_ADASUM;
}

bool fusible(const v1::Request& r) {
  return reduces_fusibly(r.op(), r.reduce_op()) || r.op() == v1::OP_TYPE_ALLGATHER;
}

bool fusible(const v1::Response& r) {
  return (reduces_fusibly(r.op(), r.reduce_op()) && r.tensor_sizes_size() == 1) ||
         (r.op() == v1::OP_TYPE_ALLGATHER && r.row_elements_size() == 1);
}

// Responses, or a response and a request (the fields have the same names).
// (A CPU and a CUDA tensor never share a buffer.)
template <class A, class B>
bool same_key(const A& a, const B& b) {
  return a.op() == b.op() && a.dtype() == b.dtype() && a.reduce_op() == b.reduce_op() &&
         a.device_kind() == b.device_kind() &&
         a.prescale_factor() == b.prescale_factor() &&
         a.postscale_factor() == b.postscale_factor();
}

// Bytes the fused buffer holds: the whole result for an allgather.
int64_t bytes_of(const v1::Response& r) {
  int64_t elements = 0;
  if (r.op() == v1::OP_TYPE_ALLGATHER) {
    const int ranks = r.tensor_sizes_size() / r.row_elements_size();
    for (int t = 0; t < r.row_elements_size(); ++t)
      for (int k = 0; k < ranks; ++k)
        elements += r.tensor_sizes(t * ranks + k) * r.row_elements(t);
  } else {
    for (auto n : r.tensor_sizes())
      elements += n;
  }
  return elements * static_cast<int64_t>(element_size(static_cast<data_type>(r.dtype())));
}

// Appends `r`'s only tensor to a bucket of the same key.
void append(v1::Response& bucket, const v1::Response& r) {
  bucket.add_tensor_names(r.tensor_names(0));
  for (auto n : r.tensor_sizes())
    bucket.add_tensor_sizes(n);
  for (auto n : r.row_elements())
    bucket.add_row_elements(n);
}

// Buckets of items 0..n-1 (indexes, each bucket in order): a fusible item
// joins the first open bucket of its key with room for its bytes, else
// opens one (unless it alone reaches the threshold: with a threshold of 0
// none opens, so nothing fuses); anything else stands alone in place.
// Buckets keep the place of their first member.
template <class CanFuse, class SameKey, class Bytes>
std::vector<std::vector<size_t>> buckets(size_t n, int64_t threshold, CanFuse can_fuse,
                                         SameKey same, Bytes bytes) {
  std::vector<std::vector<size_t>> out;
  struct open_bucket {
    size_t index;  // into `out`
    int64_t bytes;
  };
  std::vector<open_bucket> open;
  for (size_t i = 0; i < n; ++i) {
    if (!can_fuse(i)) {
      out.push_back({i});
      continue;
    }
    const auto size = bytes(i);
    auto room = std::find_if(open.begin(), open.end(), [&](const open_bucket& b) {
      return same(out[b.index].front(), i) && b.bytes + size <= threshold;
    });
    if (room != open.end()) {
      out[room->index].push_back(i);
      room->bytes += size;
      continue;
    }
    if (size < threshold)
      open.push_back({out.size(), size});
    out.push_back({i});
  }
  return out;
}

int64_t elements_of(const v1::Request& r) {
  return num_elements(shape_t(r.shape().begin(), r.shape().end()));
}

} // namespace

int64_t fusion_bytes(const v1::Request& request, const std::vector<int64_t>& first_dims) {
  int64_t elements = 0;
  if (request.op() == v1::OP_TYPE_ALLGATHER) {
    // (An allgather's request has at least one dimension.)
    const auto row = num_elements(shape_t(request.shape().begin() + 1, request.shape().end()));
    for (auto rows : first_dims)
      elements += rows * row;
  } else {
    elements = elements_of(request);
  }
  return elements * static_cast<int64_t>(element_size(static_cast<data_type>(request.dtype())));
}

bool append_agreed(v1::Response& fused, const std::string& name, const v1::Request& request,
                   const std::vector<int64_t>& first_dims) {
  const bool gathers = request.op() == v1::OP_TYPE_ALLGATHER;
  if (!fusible(request) || !same_key(fused, request) || (gathers && first_dims.empty()))
    return false;
  fused.add_tensor_names(name);
  append_sizes(fused, request, first_dims);
  return true;
}

std::vector<v1::Response> fuse(std::vector<v1::Response> ready, int64_t threshold_bytes) {
  return fuse(std::move(ready), threshold_bytes, {});
}

std::vector<v1::Response> fuse(std::vector<v1::Response> ready, int64_t threshold_bytes,
                               const std::vector<std::string>& only_within) {
  const auto groups = buckets(
    ready.size(), threshold_bytes, [&](size_t i) { return fusible(ready[i]); },
    [&](size_t a, size_t b) {
      return same_key(ready[a], ready[b]) &&
             (only_within.empty() || only_within[a] == only_within[b]);
    },
    [&](size_t i) { return bytes_of(ready[i]); });
  std::vector<v1::Response> out;
  out.reserve(groups.size());
  for (const auto& group : groups) {
    out.push_back(std::move(ready[group.front()]));
    for (size_t k = 1; k < group.size(); ++k)
      append(out.back(), ready[group[k]]);
  }
  return out;
}

std::vector<std::vector<size_t>> fusion_groups(const std::vector<const v1::Request*>& ready,
                                               const std::vector<int64_t>& bytes,
                                               int64_t threshold_bytes) {
  return buckets(
    ready.size(), threshold_bytes,
    [&](size_t i) { return fusible(*ready[i]); },
    [&](size_t a, size_t b) { return same_key(*ready[a], *ready[b]); },
    [&](size_t i) { return bytes[i]; });
}

} // namespace troupe
