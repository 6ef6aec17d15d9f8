#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::bench {

/// Every timed step of one contender on one workload, in seconds (rank 0's
/// clock). report.py pools series of the same impl / case / bytes across
/// jobs and takes medians there.
struct series {
  std::string impl;
  std::string workload;
  size_t bytes = 0;
  size_t tensors = 0;
  std::vector<double> seconds;
};

struct job_result {
  /// The Troupe contender of this job, e.g. "troupe-mpi".
  std::string troupe_label;
  int ranks = 0;
  int rounds = 0;
  /// Share of one core each rank's process used with nothing submitted.
  std::vector<double> idle_cpu_share;
  double idle_seconds = 0;
  std::vector<series> results;
};

/// Writes the job as one JSON object (the format torch_bench.py writes too).
void write_json(const job_result& job, const std::string& path);

} // namespace troupe::bench
