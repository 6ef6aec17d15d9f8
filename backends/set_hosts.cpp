#include "backends/set_hosts.hpp"

#include "elastic/store.hpp"
#include "elastic/store_exchange.hpp"

namespace troupe::backends {

std::vector<std::string> exchange_hosts(const backend_context& ctx, const std::string& scope) {
  const auto prefix = ctx.store_prefix + scope;
  ctx.store->set(prefix + "host/" + std::to_string(ctx.rank), ctx.host);
  return elastic::gather_published(*ctx.store, prefix + "host/", prefix + "hosts-published/",
                                   ctx.size, ctx.timeout);
}

} // namespace troupe::backends
