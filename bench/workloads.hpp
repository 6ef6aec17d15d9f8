#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::bench {

/// What one timed step allreduces. The same list, with the same iteration
/// counts, is in torch_bench.py: keep the two in step.
struct workload {
  /// "allreduce" (one tensor of `bytes()`), "small_tensors" (200 x 4 KiB),
  /// "resnet50" (the model's 161 gradients) or "resnet50_fp16" (the same in
  /// float16, as mixed-precision training reduces them).
  std::string name;
  /// Elements of each tensor of the step.
  std::vector<size_t> counts;
  /// Timed steps per contender and round.
  int iterations;
  /// float16 elements (16 bits on the wire) instead of float32.
  bool float16 = false;

  size_t bytes() const;
};

/// The issue-4 suite: single allreduces from 4 B to 256 MiB, 200 x 4 KiB per
/// step, the ResNet-50 gradient mix read from `resnet_sizes_file`, in float32
/// and in float16. `quick`
/// keeps every workload but shrinks sizes and step counts to a smoke test.
std::vector<workload> make_workloads(bool quick, const std::string& resnet_sizes_file);

} // namespace troupe::bench
