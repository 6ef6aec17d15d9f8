#include "proto/fusion.hpp"

#include "troupe/types.hpp"

namespace troupe {

namespace {

// Adasum's dot products and norms are per tensor, so its tensors run alone.
bool fusible(const v1::Response& r) {
  return (r.op() == v1::OP_TYPE_ALLREDUCE && r.tensor_sizes_size() == 1 &&
          r.reduce_op() != v1::REDUCE_OP_ADASUM) ||
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

} // namespace

bool append_allreduce(v1::Response& fused, const std::string& name, const v1::Request& request) {
  if (request.op() != v1::OP_TYPE_ALLREDUCE || request.reduce_op() == v1::REDUCE_OP_ADASUM ||
      !same_key(fused, request))
    return false;
  fused.add_tensor_names(name);
  fused.add_tensor_sizes(num_elements(shape_t(request.shape().begin(), request.shape().end())));
  return true;
}

std::vector<v1::Response> fuse(std::vector<v1::Response> ready, int64_t threshold_bytes) {
  if (threshold_bytes <= 0)
    return ready;
  std::vector<v1::Response> out;
  std::vector<size_t> open;  // indexes into `out` of buckets that may still grow
  for (auto& r : ready) {
    if (!fusible(r)) {
      out.push_back(std::move(r));
      continue;
    }
    const auto size = bytes_of(r);
    bool placed = false;
    for (auto idx : open) {
      auto& bucket = out[idx];
      if (same_key(bucket, r) && bytes_of(bucket) + size <= threshold_bytes) {
        append(bucket, r);
        placed = true;
        break;
      }
    }
    if (!placed) {
      if (size < threshold_bytes)
        open.push_back(out.size());
      out.push_back(std::move(r));
    }
  }
  return out;
}

} // namespace troupe
