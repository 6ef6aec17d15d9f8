#include "bench/workloads.hpp"

#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace troupe::bench {

namespace {

// About a second per contender and size on this 2-core machine: enough
// samples for a stable median without the 256 MiB rows dominating the run.
int iterations_for(size_t bytes) {
  if (bytes <= (64u << 10))
    return 100;
  if (bytes <= (1u << 20))
    return 40;
  if (bytes <= (16u << 20))
    return 8;
  if (bytes <= (64u << 20))
    return 3;
  return 2;
}

// One element count per line, the first word; '#' starts a comment line.
std::vector<size_t> read_counts(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::vector<size_t> counts;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#')
      continue;
    size_t count = 0;
    if (!(std::istringstream{line} >> count) || count == 0)
      throw std::runtime_error(path + ": bad line '" + line + "'");
    counts.push_back(count);
  }
  return counts;
}

} // namespace

size_t workload::bytes() const {
  return std::accumulate(counts.begin(), counts.end(), size_t{0}) *
         (float16 ? size_t{2} : sizeof(float));
}

std::vector<workload> make_workloads(bool quick, const std::string& resnet_sizes_file) {
  const std::vector<size_t> sizes =
    quick ? std::vector<size_t>{4, 1u << 10, 64u << 10}
          : std::vector<size_t>{4, 1u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20,
                                256u << 20};
  std::vector<workload> out;
  for (size_t bytes : sizes)
    out.push_back({"allreduce", {bytes / sizeof(float)}, quick ? 5 : iterations_for(bytes)});
  out.push_back({"small_tensors", std::vector<size_t>(200, 1024), quick ? 3 : 50});
  const auto resnet = read_counts(resnet_sizes_file);
  out.push_back({"resnet50", resnet, quick ? 1 : 3});
  out.push_back({"resnet50_fp16", resnet, quick ? 1 : 3, true});
  return out;
}

} // namespace troupe::bench
