#include "elastic/store_endpoint.hpp"

#include "elastic/embedded_store.hpp"
#include "elastic/etcd_store_client.hpp"

#include <charconv>
#include <stdexcept>

namespace troupe::elastic {

std::string store_endpoint::describe() const {
  const auto address = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (kind == backend::embedded)
    return address + ":" + std::to_string(port);
  return "etcd://" + address + ":" + std::to_string(port) + "/" + prefix;
}

store_endpoint parse_rendezvous(const std::string& url) {
  const std::string scheme = "etcd://";
  auto bad = [&url](const std::string& why) {
    return std::invalid_argument("rendezvous '" + url + "' " + why +
                                 " (expected etcd://HOST:PORT[/PREFIX])");
  };
  if (url.compare(0, scheme.size(), scheme) != 0)
    throw bad("is not an etcd:// URL");
  store_endpoint out;
  out.kind = store_endpoint::backend::etcd;
  auto rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  out.prefix = slash == std::string::npos ? default_etcd_prefix : rest.substr(slash + 1);
  rest = rest.substr(0, slash);
  std::string port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      throw bad("has an unclosed IPv6 address or no port");
    out.host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos)
      throw bad("has no port");
    out.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (out.host.empty() || ec != std::errc{} || end != port.data() + port.size() || value == 0 ||
      value > 65535)
    throw bad("has no host or no port in 1..65535");
  out.port = static_cast<uint16_t>(value);
  return out;
}

std::unique_ptr<store_client> connect_store(const store_endpoint& where,
                                            const std::string& secret,
                                            std::chrono::milliseconds timeout) {
  if (where.kind == store_endpoint::backend::etcd)
    return std::make_unique<etcd_store_client>(where, secret, timeout);
  return std::make_unique<embedded_store_client>(where.host, where.port, secret, timeout);
}

} // namespace troupe::elastic
