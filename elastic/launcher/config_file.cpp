#include "elastic/launcher/config_file.hpp"

#include "elastic/launcher/options.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <iterator>

namespace troupe::elastic::launcher {

namespace {

enum class value_kind {
  text,       // passed as written
  boolean,    // true/false, yes/no, on/off -> 1 / 0
  negated,    // as boolean, inverted (stall_check.enabled -> ..._DISABLE)
  mebibytes,  // a whole number of MiB -> bytes
};

// horovodrun's keys (runner/common/util/config_parser.py) and the knob
// each sets; the flag beside it is horovodrun's name for the same setting.
struct config_key {
  const char* section;
  const char* key;
  const char* env;
  value_kind kind;
};

const config_key config_keys[] = {
  {"params", "fusion_threshold_mb", "TROUPE_FUSION_THRESHOLD", value_kind::mebibytes},
  {"params", "cycle_time_ms", "TROUPE_CYCLE_TIME", value_kind::text},
  {"params", "cache_capacity", "TROUPE_CACHE_CAPACITY", value_kind::text},
  {"params", "hierarchical_allreduce", "TROUPE_HIERARCHICAL_ALLREDUCE", value_kind::boolean},
  {"params", "hierarchical_allgather", "TROUPE_HIERARCHICAL_ALLGATHER", value_kind::boolean},
  {"autotune", "enabled", "TROUPE_AUTOTUNE", value_kind::boolean},
  {"autotune", "log_file", "TROUPE_AUTOTUNE_LOG", value_kind::text},
  {"autotune", "warmup_samples", "TROUPE_AUTOTUNE_WARMUP_SAMPLES", value_kind::text},
  {"autotune", "steps_per_sample", "TROUPE_AUTOTUNE_STEPS_PER_SAMPLE", value_kind::text},
  {"autotune", "bayes_opt_max_samples", "TROUPE_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
   value_kind::text},
  {"autotune", "gaussian_process_noise", "TROUPE_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
   value_kind::text},
  {"timeline", "filename", "TROUPE_TIMELINE", value_kind::text},
  {"timeline", "mark_cycles", "TROUPE_TIMELINE_MARK_CYCLES", value_kind::boolean},
  {"stall_check", "enabled", "TROUPE_STALL_CHECK_DISABLE", value_kind::negated},
  {"stall_check", "warning_time_seconds", "TROUPE_STALL_CHECK_TIME_SECONDS", value_kind::text},
  {"stall_check", "shutdown_time_seconds", "TROUPE_STALL_SHUTDOWN_TIME_SECONDS",
   value_kind::text},
  {"library_options", "mpi_threads_disable", "TROUPE_MPI_THREADS_DISABLE", value_kind::boolean},
  {"library_options", "num_nccl_streams", "TROUPE_NUM_NCCL_STREAMS", value_kind::text},
  {"library_options", "gloo_timeout_seconds", "TROUPE_GLOO_TIMEOUT_SECONDS", value_kind::text},
  {"library_options", "thread_affinity", "TROUPE_THREAD_AFFINITY", value_kind::text},
  {"logging", "level", "TROUPE_LOG_LEVEL", value_kind::text},
  {"logging", "hide_timestamp", "TROUPE_LOG_HIDE_TIME", value_kind::boolean},
};

// Keys horovodrun knows that name something Troupe does not have.
struct unused_key {
  const char* section;
  const char* key;
  const char* why;
};

const unused_key unused_keys[] = {
  {"params", "torus_allreduce", "Troupe has no torus allreduce"},
  {"library_options", "ccl_bgt_affinity", "Troupe has no oneCCL backend"},
};

std::string scalar_of(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar())
    throw config_file_error(where + " must be a single value");
  return node.Scalar();
}

bool boolean_of(const YAML::Node& node, const std::string& where) {
  bool out = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, out))
    throw config_file_error(where + ": '" + YAML::Dump(node) +
                            "' is not true or false");
  return out;
}

std::string value_of(const YAML::Node& node, value_kind kind, const std::string& where) {
  switch (kind) {
  case value_kind::text:
    return scalar_of(node, where);
  case value_kind::boolean:
    return boolean_of(node, where) ? "1" : "0";
  case value_kind::negated:
    return boolean_of(node, where) ? "0" : "1";
  case value_kind::mebibytes: {
    const auto text = scalar_of(node, where);
    const auto mib = whole_number(text);
    if (!mib)
      throw config_file_error(where + ": '" + text + "' is not a whole number of MiB");
    return std::to_string(*mib << 20);
  }
  }
  return {};
}

template <class Table>
auto find_key(const Table& table, const std::string& section, const std::string& key) {
  return std::find_if(std::begin(table), std::end(table), [&](const auto& k) {
    return section == k.section && key == k.key;
  });
}

} // namespace

config_file read_config_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw config_file_error(path + ": cannot be read");
  } catch (const YAML::Exception& e) {
    throw config_file_error(path + ": not YAML: " + e.what());
  }
  config_file out;
  if (root.IsNull())
    return out;
  if (!root.IsMap())
    throw config_file_error(path + ": expected sections (params:, autotune:, ...) at the top");
  for (const auto& section : root) {
    const auto name = section.first.as<std::string>();
    const auto where = path + ": " + name;
    if (name == "controller") {
      auto value = scalar_of(section.second, where);
      std::transform(value.begin(), value.end(), value.begin(), ::tolower);
      if (value != "gloo" && value != "mpi")
        throw config_file_error(where + ": '" + value + "' is not gloo or mpi");
      out.controller = value;
      continue;
    }
    if (section.second.IsNull())
      continue;
    if (!section.second.IsMap()) {
      out.ignored.push_back(name + " (not a section of horovodrun's)");
      continue;
    }
    for (const auto& entry : section.second) {
      const auto key = entry.first.as<std::string>();
      const auto entry_where = where + "." + key;
      if (const auto k = find_key(config_keys, name, key); k != std::end(config_keys)) {
        out.knobs.emplace_back(k->env, value_of(entry.second, k->kind, entry_where));
      } else if (const auto u = find_key(unused_keys, name, key); u != std::end(unused_keys)) {
        bool on = true;
        // Turned off, it asks for what Troupe does anyway.
        if (!YAML::convert<bool>::decode(entry.second, on) || on)
          out.ignored.push_back(name + "." + key + " (" + u->why + ")");
      } else {
        out.ignored.push_back(name + "." + key + " (not a key of horovodrun's)");
      }
    }
  }
  return out;
}

} // namespace troupe::elastic::launcher
