#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::bench {

/// One buffer of a step, reduced in place.
struct buffer_view {
  void* data;
  size_t count;
  /// float16 elements (IEEE half), else float32.
  bool float16;
  /// Collective name (Troupe negotiates by name; raw libraries ignore it).
  std::string name;
};

/// Something that can allreduce: Troupe or a library it is compared with.
class contender {
public:
  virtual ~contender() = default;
  /// Label in the tables and JSON, e.g. "troupe-mpi", "raw-gloo".
  virtual std::string label() const = 0;
  /// In-place sum of every buffer across all ranks; returns when all
  /// are done. Each contender does what a straightforward user of it would:
  /// Troupe submits everything and then waits, raw libraries call one
  /// blocking allreduce after the other.
  virtual void allreduce_all(const std::vector<buffer_view>& buffers) = 0;
  /// Around each run of allreduce_all calls (a round, the warm-up step):
  /// where a contender's users run it otherwise than this process runs
  /// (raw Gloo unbound where troupe-run binds the rank), it switches there
  /// and back.
  virtual void enter() {
  }
  virtual void leave() {
  }
};

} // namespace troupe::bench
