// The only file that knows which backends were compiled in.
#include "backends/registry.hpp"

#include "backends/local/local_backend.hpp"
#include "backends/config.h"
#if TROUPE_HAVE_GLOO
#include "backends/gloo/gloo_backend.hpp"
#endif

namespace troupe::backends {

std::vector<std::string> built_cpu_backends() {
  std::vector<std::string> names;
#if TROUPE_HAVE_GLOO
  names.emplace_back("gloo");
#endif
  return names;
}

std::unique_ptr<backend> make_cpu_backend(const backend_context& ctx,
                                          const std::string& name) {
  if (ctx.size == 1)
    return std::make_unique<local_backend>();
  auto built = built_cpu_backends();
  const auto& chosen = name.empty() && !built.empty() ? built.front() : name;
#if TROUPE_HAVE_GLOO
  if (chosen == "gloo")
    return std::make_unique<gloo_backend>(ctx);
#endif
  std::string have;
  for (const auto& b : built)
    have += (have.empty() ? "" : ", ") + b;
  throw backend_error("CPU backend '" + chosen + "' is not built into this Troupe (built: " +
                      (have.empty() ? "none" : have) + ")");
}

} // namespace troupe::backends
