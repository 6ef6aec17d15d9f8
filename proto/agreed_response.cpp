#include "proto/agreed_response.hpp"

#include "troupe/types.hpp"

namespace troupe {

v1::Response agreed_response_of(const std::string& name, const v1::Request& request) {
  v1::Response resp;
  resp.set_op(request.op());
  resp.add_tensor_names(name);
  resp.set_dtype(request.dtype());
  resp.set_root_rank(request.root_rank());
  resp.set_reduce_op(request.reduce_op());
  resp.set_prescale_factor(request.prescale_factor());
  resp.set_postscale_factor(request.postscale_factor());
  resp.set_device_kind(request.device_kind());
  append_sizes(resp, request, {});
  return resp;
}

v1::Response agreed_allgather_of(const std::string& name, const v1::Request& request,
                                 const std::vector<int64_t>& first_dims) {
  auto resp = agreed_response_of(name, request);
  append_sizes(resp, request, first_dims);
  return resp;
}

void append_sizes(v1::Response& resp, const v1::Request& request,
                  const std::vector<int64_t>& first_dims) {
  const auto& shape = request.shape();
  if (request.op() == v1::OP_TYPE_ALLREDUCE || request.op() == v1::OP_TYPE_REDUCESCATTER) {
    resp.add_tensor_sizes(num_elements(shape_t(shape.begin(), shape.end())));
  } else if (request.op() == v1::OP_TYPE_ALLGATHER && !first_dims.empty()) {
    for (auto rows : first_dims)
      resp.add_tensor_sizes(rows);
    resp.add_row_elements(num_elements(shape_t(shape.begin() + 1, shape.end())));
  }
}

bool agreed_without_coordinator(const v1::Request& request) {
  const auto op = request.op();
  return (op == v1::OP_TYPE_ALLREDUCE || op == v1::OP_TYPE_BROADCAST ||
          op == v1::OP_TYPE_ALLGATHER || op == v1::OP_TYPE_ALLTOALL ||
          op == v1::OP_TYPE_REDUCESCATTER) &&
         request.group_name().empty();
}

} // namespace troupe
