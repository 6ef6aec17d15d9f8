#include "backends/execute.hpp"

#include <cstring>

namespace troupe::backends {

namespace {

template <class T>
void divide(void* data, size_t count, int by) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i)
    p[i] = static_cast<T>(p[i] / static_cast<T>(by));
}

void average(void* data, size_t count, data_type dtype, int set_size) {
  switch (dtype) {
    case data_type::float32: return divide<float>(data, count, set_size);
    case data_type::float64: return divide<double>(data, count, set_size);
    case data_type::int32: return divide<int32_t>(data, count, set_size);
    case data_type::int64: return divide<int64_t>(data, count, set_size);
    case data_type::uint8: return divide<uint8_t>(data, count, set_size);
    case data_type::int8: return divide<int8_t>(data, count, set_size);
    default:
      throw backend_error(std::string("average is not supported for ") + to_string(dtype));
  }
}

void run_allreduce(backend& b, int set_size, const v1::Response& resp,
                   actors::tensor_entry& e) {
  const auto count = static_cast<size_t>(num_elements(e.input.shape));
  if (e.output.data != e.input.data)
    std::memcpy(e.output.data, e.input.data, e.input.size_bytes());
  allreduce_options o;
  o.data = e.output.data;
  o.count = count;
  o.dtype = e.input.dtype;
  o.op = static_cast<reduce_op>(resp.reduce_op());
  b.allreduce(o);
  if (o.op == reduce_op::average)
    average(o.data, count, o.dtype, set_size);
}

void run_allgather(backend& b, const v1::Response& resp, actors::tensor_entry& e) {
  const auto& shape = e.input.shape;
  const int64_t row = num_elements(shape_t(shape.begin() + 1, shape.end()));
  allgather_options o;
  o.input = e.input.data;
  o.dtype = e.input.dtype;
  int64_t rows = 0;
  for (auto dim0 : resp.tensor_sizes()) {
    o.counts.push_back(static_cast<size_t>(dim0 * row));
    rows += dim0;
  }
  auto& h = *e.handle;
  h.output_shape = shape;
  h.output_shape[0] = rows;
  h.output.resize(static_cast<size_t>(rows * row) * element_size(o.dtype));
  o.output = h.output.data();
  b.allgather(o);
}

void run_broadcast(backend& b, const v1::Response& resp, actors::tensor_entry& e) {
  broadcast_options o;
  o.data = e.input.data;
  o.count = static_cast<size_t>(num_elements(e.input.shape));
  o.dtype = e.input.dtype;
  o.root = resp.root_rank();
  b.broadcast(o);
}

} // namespace

status execute(backend& b, int set_size, actors::collective_work& work) {
  try {
    for (auto& entry : work.entries) {
      switch (work.response.op()) {
        case v1::OP_TYPE_ALLREDUCE:
          run_allreduce(b, set_size, work.response, *entry);
          break;
        case v1::OP_TYPE_ALLGATHER:
          run_allgather(b, work.response, *entry);
          break;
        case v1::OP_TYPE_BROADCAST:
          run_broadcast(b, work.response, *entry);
          break;
        default:
          return {status_code::internal,
                  "operation " + v1::OpType_Name(work.response.op()) +
                    " is not executable by this runtime version"};
      }
    }
  } catch (const backend_error& e) {
    return {status_code::backend, e.what()};
  } catch (const std::exception& e) {
    return {status_code::internal, e.what()};
  }
  return {};
}

} // namespace troupe::backends
