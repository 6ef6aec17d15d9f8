#include "workers/listen_address.hpp"

#include <memory>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

namespace troupe::workers {

namespace {

std::string dotted(const sockaddr* addr) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  return text;
}

bool is_loopback(const sockaddr* addr) {
  return (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127;
}

std::string host_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw config_error("cannot resolve this rank's host name '" + host +
                       "': " + ::gai_strerror(rc) + "; set TROUPE_NETWORK_INTERFACE");
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner{found, ::freeaddrinfo};
  for (auto* it = found; it; it = it->ai_next)
    if (!is_loopback(it->ai_addr))
      return dotted(it->ai_addr);
  return dotted(found->ai_addr);
}

} // namespace

std::string interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    throw config_error("TROUPE_NETWORK_INTERFACE='" + name + "': cannot list interfaces");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner{list, ::freeifaddrs};
  std::string seen;
  for (auto* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET)
      continue;
    if (name == it->ifa_name)
      return dotted(it->ifa_addr);
    seen += (seen.empty() ? "" : ", ") + std::string(it->ifa_name);
  }
  throw config_error("TROUPE_NETWORK_INTERFACE='" + name +
                     "' is not an interface with an IPv4 address here (there are: " + seen + ")");
}

std::string listen_address(const identity& id, const config& cfg) {
  if (!cfg.network_interface.empty())
    return interface_address(cfg.network_interface);
  if (id.local_size == id.size)
    return "127.0.0.1";
  return host_address(id.hostname);
}

} // namespace troupe::workers
