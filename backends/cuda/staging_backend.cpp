#include "backends/cuda/staging_backend.hpp"

#include "backends/cuda/cuda_runtime.hpp"

namespace troupe::backends {

/// A device's stream for the staging copies and its pinned host memory.
struct staging_backend::device {
  cuda::stream stream;
  cuda::event producer;  // scratch for cuda::wait_for_producer
  cuda::growing_buffer inputs{cuda::growing_buffer::where::pinned_host, nullptr};
};

namespace {

bool on_gpu(const actors::tensor_entry& e) {
  return e.input.device.kind == device_kind::cuda;
}

// A result sized by negotiation: the caller's device memory and its host
// copy, which the CPU backend writes.
struct sized_result {
  void* device = nullptr;
  std::vector<char> host;
};

// One staged CUDA tensor: where its result goes back to.
struct staged_entry {
  actors::tensor_entry* original;
  actors::tensor_entry_ptr host;  // the CPU backend's view
  std::shared_ptr<sized_result> sized;  // allgather, alltoall, reducescatter
};

// The CPU backend's work on host copies; once it has finished, the results
// are copied back to device memory and waited for.
class staged_completion : public completion {
public:
  staged_completion(std::unique_ptr<completion> cpu, std::unique_ptr<actors::collective_work> work,
                    std::function<void()> copy_back)
    : cpu_(std::move(cpu)), work_(std::move(work)), copy_back_(std::move(copy_back)) {
  }

  std::optional<status> poll() override {
    auto result = cpu_->poll();
    if (!result || !result->ok())
      return result;
    try {
      copy_back_();
    } catch (const backend_error& e) {
      return status{status_code::backend, e.what()};
    }
    return result;
  }

private:
  std::unique_ptr<completion> cpu_;
  std::unique_ptr<actors::collective_work> work_;  // the host copies' entries
  std::function<void()> copy_back_;
};

} // namespace

staging_backend::staging_backend(std::unique_ptr<backend> cpu) : cpu_(std::move(cpu)) {
}

staging_backend::~staging_backend() {
  for (auto& [ordinal, d] : devices_) {
    cuda::device_guard on(ordinal);
    d.reset();
  }
}

staging_backend::device& staging_backend::device_for(int ordinal) {
  auto& d = devices_[ordinal];
  if (!d)
    d = std::make_unique<device>();
  return *d;
}

std::unique_ptr<completion> staging_backend::start(actors::collective_work& work) {
  int ordinal = -1;
  try {
    ordinal = cuda::work_device(work, -1);
  } catch (const backend_error& e) {
    return std::make_unique<finished>(status{status_code::backend, e.what()});
  }
  if (ordinal < 0)
    return cpu_->start(work);
  try {
    cuda::device_guard on(ordinal);
    auto& dev = device_for(ordinal);
    const auto stream = dev.stream.get();
    size_t total = 0;
    for (const auto& e : work.entries)
      if (on_gpu(*e))
        total += e->input.size_bytes();
    char* host = dev.inputs.at_least(total);

    auto shadow = std::make_unique<actors::collective_work>();
    shadow->id = work.id;
    shadow->response = work.response;
    shadow->trace = work.trace;
    std::vector<staged_entry> staged;
    for (const auto& e : work.entries) {
      if (!on_gpu(*e)) {
        shadow->entries.push_back(e);
        continue;
      }
      cuda::wait_for_producer(e->input.device, stream, dev.producer);
      const auto bytes = e->input.size_bytes();
      if (bytes > 0)
        cuda::check(cudaMemcpyAsync(host, e->input.data, bytes, cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync (staging a CUDA tensor to the host)");
      auto copy = std::make_shared<actors::tensor_entry>(*e);
      // Reduced and broadcast in place on the host copy.
      copy->input = tensor{host, e->input.dtype, e->input.shape};
      copy->output = copy->input;
      std::shared_ptr<sized_result> sized;
      if (e->allocate) {
        sized = std::make_shared<sized_result>();
        copy->allocate = [sized, allocate = e->allocate, dtype = e->input.dtype](
                           const shape_t& shape) -> void* {
          sized->device = allocate(shape);
          sized->host.resize(static_cast<size_t>(num_elements(shape)) * element_size(dtype));
          return sized->host.data();
        };
      }
      staged.push_back({e.get(), copy, sized});
      shadow->entries.push_back(std::move(copy));
      host += bytes;
    }
    // The CPU backend reads the host copies right away.
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (staging stream)");

    auto copy_back = [staged, stream, ordinal] {
      cuda::device_guard on(ordinal);
      for (const auto& s : staged) {
        if (s.sized) {
          if (!s.sized->host.empty())
            cuda::check(cudaMemcpyAsync(s.sized->device, s.sized->host.data(),
                                        s.sized->host.size(), cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync (a staged result to the device)");
        } else if (s.host->input.size_bytes() > 0) {
          cuda::check(cudaMemcpyAsync(s.original->output.data, s.host->input.data,
                                      s.host->input.size_bytes(), cudaMemcpyHostToDevice, stream),
                      "cudaMemcpyAsync (a staged result to the device)");
        }
      }
      // The host copies are reused by the next work (the CPU backends
      // finish a work within start(), so none overlaps).
      cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (staging stream)");
    };
    auto& shadow_work = *shadow;
    auto cpu = cpu_->start(shadow_work);
    return std::make_unique<staged_completion>(std::move(cpu), std::move(shadow),
                                               std::move(copy_back));
  } catch (const backend_error& e) {
    return std::make_unique<finished>(status{status_code::backend, e.what()});
  }
}

} // namespace troupe::backends
