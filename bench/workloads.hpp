#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::bench {

/// What one timed step allreduces. The same list, with the same iteration
/// counts, is in torch_bench.py: keep the two in step.
struct workload {
  /// "allreduce" (one tensor of `bytes()`), "small_tensors" (200 x 4 KiB) or
  /// "resnet50" (the model's 161 gradients).
  std::string name;
  /// float32 elements of each tensor of the step.
  std::vector<size_t> counts;
  /// Timed steps per contender and round.
  int iterations;

  size_t bytes() const;
};

/// The issue-4 suite: single allreduces from 4 B to 256 MiB, 200 x 4 KiB per
/// step, the ResNet-50 gradient mix read from `resnet_sizes_file`. `quick`
/// keeps every workload but shrinks sizes and step counts to a smoke test.
std::vector<workload> make_workloads(bool quick, const std::string& resnet_sizes_file);

} // namespace troupe::bench
