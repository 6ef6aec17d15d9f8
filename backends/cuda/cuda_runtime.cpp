#include "backends/cuda/cuda_runtime.hpp"

namespace troupe::backends::cuda {

void check(cudaError_t result, const char* what) {
  if (result != cudaSuccess)
    throw backend_error(std::string(what) + ": " + cudaGetErrorString(result));
}

std::string device_problem() {
  int count = 0;
  const auto result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    // Clears the error, so that it does not show up in a later call.
    cudaGetLastError();
    return std::string("no CUDA device is visible to this process (cudaGetDeviceCount: ") +
           cudaGetErrorString(result) + ")";
  }
  return count > 0 ? std::string() : "no CUDA device is visible to this process";
}

device_guard::device_guard(int ordinal) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != ordinal)
    check(cudaSetDevice(ordinal), ("cudaSetDevice(" + std::to_string(ordinal) + ")").c_str());
}

device_guard::~device_guard() {
  cudaSetDevice(previous_);
}

stream::stream() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

stream::~stream() {
  cudaStreamDestroy(stream_);
}

event::event(timing t) {
  check(cudaEventCreateWithFlags(&event_, t == timing::on ? cudaEventDefault
                                                           : cudaEventDisableTiming),
        "cudaEventCreate");
}

event::~event() {
  cudaEventDestroy(event_);
}

void event::record(cudaStream_t on) {
  check(cudaEventRecord(event_, on), "cudaEventRecord");
}

bool event::done() const {
  const auto result = cudaEventQuery(event_);
  if (result == cudaErrorNotReady)
    return false;
  check(result, "the GPU work of a collective");
  return true;
}

int64_t elapsed_us(const event& from, const event& to) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, from.get(), to.get()), "cudaEventElapsedTime");
  return static_cast<int64_t>(ms * 1000.0f);
}

int work_device(const actors::collective_work& work, int fallback) {
  const actors::tensor_entry* first = nullptr;
  for (const auto& e : work.entries) {
    if (e->input.device.kind != device_kind::cuda)
      continue;
    if (first == nullptr)
      first = e.get();
    else if (e->input.device.ordinal != first->input.device.ordinal)
      throw backend_error("tensors '" + first->request.tensor_name() + "' (" +
                          to_string(first->input.device) + ") and '" +
                          e->request.tensor_name() + "' (" + to_string(e->input.device) +
                          ") were fused into one collective; a rank's CUDA tensors of one "
                          "process set must be on one device");
  }
  return first != nullptr ? first->input.device.ordinal : fallback;
}

void wait_for_producer(const tensor_device& producer, cudaStream_t on, event& scratch) {
  auto ready = static_cast<cudaEvent_t>(producer.ready_event);
  if (ready == nullptr && producer.stream != nullptr) {
    scratch.record(static_cast<cudaStream_t>(producer.stream));
    ready = scratch.get();
  }
  if (ready != nullptr)
    check(cudaStreamWaitEvent(on, ready, 0), "cudaStreamWaitEvent (the tensor's producer)");
}

growing_buffer::~growing_buffer() {
  release();
}

void growing_buffer::release() {
  if (data_ == nullptr)
    return;
  if (where_ == where::device)
    cudaFreeAsync(data_, order_);
  else
    cudaFreeHost(data_);
  data_ = nullptr;
  capacity_ = 0;
}

char* growing_buffer::at_least(size_t bytes) {
  if (bytes <= capacity_ && data_ != nullptr)
    return data_;
  release();
  // Never empty, so that a pointer exists for a collective of no bytes.
  const size_t size = bytes > 0 ? bytes : 1;
  void* memory = nullptr;
  if (where_ == where::device)
    check(cudaMallocAsync(&memory, size, order_), "cudaMallocAsync (fusion buffer)");
  else
    check(cudaHostAlloc(&memory, size, cudaHostAllocDefault), "cudaHostAlloc (staging buffer)");
  data_ = static_cast<char*>(memory);
  capacity_ = size;
  return data_;
}

} // namespace troupe::backends::cuda
