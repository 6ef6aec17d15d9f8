#include "autotune/autotune_log.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace troupe::autotune {

autotune_log::autotune_log(const std::string& path) : out_(path, std::ios::trunc) {
  if (!out_)
    throw std::runtime_error("cannot write the autotune log '" + path +
                             "': " + std::strerror(errno));
  out_ << "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
          "cycle_time_ms,tensor_fusion_threshold,score,fusion_chunk_bytes\n"
       << std::flush;
}

void autotune_log::row(const settings& s, double bytes_per_second) {
  out_ << fmt::format("0,0,0,{},{},{},{},{}\n", s.cache_enabled ? 1 : 0, s.cycle_time_ms,
                      static_cast<double>(s.fusion_threshold) / (1 << 20),
                      bytes_per_second / 1e6, s.fusion_chunk_bytes)
       << std::flush;
}

std::string log_path(const std::string& path, uint32_t set_id, int64_t epoch) {
  std::string tag;
  if (set_id != 0)
    tag += ".set" + std::to_string(set_id);
  if (epoch != 0)
    tag += ".epoch" + std::to_string(epoch);
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  return has_ext ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
}

} // namespace troupe::autotune
