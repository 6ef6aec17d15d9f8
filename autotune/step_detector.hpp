#pragma once

#include <cstddef>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace troupe::autotune {

/// Finds where training steps begin in a process set's stream of response
/// lists, from the tensor names alone: a training step submits each of its
/// tensors once (the assumption behind Horovod's per-tensor sample counts),
/// so a step begins with the first list that names a tensor already named
/// since the last beginning. A list holding the end of one step and the
/// start of the next counts as a beginning. Names are kept as 64-bit hashes.
class step_detector {
public:
  /// Records a tensor of the list being read.
  void add_name(std::string_view name);
  /// Ends the list being read: true if it began a new step.
  bool end_list();

private:
  std::unordered_set<size_t> step_;  // names since the step began
  std::vector<size_t> list_;         // names of the list being read
  bool repeat_ = false;
};

} // namespace troupe::autotune
