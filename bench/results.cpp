#include "bench/results.hpp"

#include <cstdio>
#include <stdexcept>

namespace troupe::bench {

namespace {

// Labels and workload names are the bench's own ASCII identifiers: no
// escaping needed.
void write_doubles(std::FILE* f, const std::vector<double>& values) {
  std::fputc('[', f);
  for (size_t i = 0; i < values.size(); ++i)
    std::fprintf(f, "%s%.9g", i ? ", " : "", values[i]);
  std::fputc(']', f);
}

} // namespace

void write_json(const job_result& job, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f)
    throw std::runtime_error("cannot write " + path);
  std::fprintf(f, "{\"ranks\": %d, \"rounds\": %d,", job.ranks, job.rounds);
  if (!job.troupe_label.empty()) {  // a raw peer's job has no Troupe to sit idle
    std::fprintf(f, "\n \"idle\": {\"impl\": \"%s\", \"seconds\": %g, \"cpu_share_per_rank\": ",
                 job.troupe_label.c_str(), job.idle_seconds);
    write_doubles(f, job.idle_cpu_share);
    std::fputs("},", f);
  }
  std::fprintf(f, "\n \"series\": [");
  for (size_t i = 0; i < job.results.size(); ++i) {
    const auto& s = job.results[i];
    std::fprintf(f, "%s\n  {\"impl\": \"%s\", \"workload\": \"%s\", \"bytes\": %zu, "
                    "\"tensors\": %zu, \"seconds\": ",
                 i ? "," : "", s.impl.c_str(), s.workload.c_str(), s.bytes, s.tensors);
    write_doubles(f, s.seconds);
    std::fputc('}', f);
  }
  std::fprintf(f, "]}\n");
  if (std::fclose(f) != 0)
    throw std::runtime_error("cannot write " + path);
}

} // namespace troupe::bench
