#include "control/control_links.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "control/control_tree.hpp"

namespace troupe::control {

control_links::control_links(int32_t size) : size_(std::max(size, 1)) {}

control_links control_links::from_parents(int32_t size, std::vector<int32_t> parents) {
  control_links out{size};
  if (parents.empty())
    return out;
  if (static_cast<int32_t>(parents.size()) != size || parents.front() != -1)
    throw std::invalid_argument("control_links: a tree needs one parent per rank, -1 for rank 0");
  out.depth_.assign(parents.size(), 0);
  for (size_t r = 1; r < parents.size(); ++r) {
    // Subtrees are ranges starting at their root: a parent is a lower rank.
    if (parents[r] < 0 || static_cast<size_t>(parents[r]) >= r)
      throw std::invalid_argument("control_links: rank " + std::to_string(r) +
                                  "'s parent is not a lower rank");
    out.depth_[r] = out.depth_[static_cast<size_t>(parents[r])] + 1;
  }
  out.parents_ = std::move(parents);
  return out;
}

control_links control_links::plan(const std::vector<int32_t>& fanouts,
                                  const std::vector<std::string>& hosts) {
  const auto size = static_cast<int32_t>(fanouts.size());
  if (size == 0)
    return control_links{1};
  const int32_t fanout = fanouts.front();
  if (std::any_of(fanouts.begin(), fanouts.end(), [&](int32_t f) { return f != fanout; }) ||
      !tree_possible(size, fanout))
    return control_links{size};
  const auto starts = host_starts(hosts);
  std::vector<int32_t> parents(static_cast<size_t>(size));
  for (int32_t r = 0; r < size; ++r)
    parents[static_cast<size_t>(r)] = control_tree_node(r, size, fanout, starts).parent;
  auto out = from_parents(size, std::move(parents));
  out.fanout_ = fanout;
  out.hosts_ = hosts;
  return out;
}

std::vector<int32_t> control_links::set_contacts(int32_t rank,
                                                 const std::vector<int>& members) const {
  std::vector<int32_t> out;
  const auto at = std::find(members.begin(), members.end(), rank);
  if (mesh() || at == members.end())
    return out;
  const auto set_size = static_cast<int32_t>(members.size());
  auto add = [&](int32_t r) {
    if (r != rank && !linked(rank, r) && std::find(out.begin(), out.end(), r) == out.end())
      out.push_back(r);
  };
  add(members.front());
  if (tree_possible(set_size, fanout_)) {
    std::vector<std::string> set_hosts;
    for (auto m : members)
      set_hosts.push_back(static_cast<size_t>(m) < hosts_.size() ? hosts_[static_cast<size_t>(m)]
                                                                  : std::string{});
    const auto node = control_tree_node(static_cast<int32_t>(at - members.begin()), set_size,
                                        fanout_, host_starts(set_hosts));
    if (node.parent >= 0)
      add(members[static_cast<size_t>(node.parent)]);
  }
  return out;
}

std::vector<int32_t> control_links::dials(int32_t rank) const {
  std::vector<int32_t> out;
  if (mesh()) {
    for (int32_t r = rank - 1; r >= 0; --r)
      out.push_back(r);
  } else if (parents_.at(static_cast<size_t>(rank)) >= 0) {
    out.push_back(parents_[static_cast<size_t>(rank)]);
  }
  return out;
}

std::vector<int32_t> control_links::neighbours(int32_t rank) const {
  std::vector<int32_t> out;
  for (int32_t r = 0; r < size_; ++r)
    if (linked(rank, r))
      out.push_back(r);
  return out;
}

bool control_links::linked(int32_t a, int32_t b) const {
  return a != b && (mesh() || parents_.at(static_cast<size_t>(a)) == b ||
                    parents_.at(static_cast<size_t>(b)) == a);
}

bool control_links::connected(int32_t a, int32_t b, const std::vector<bool>& gone) const {
  auto is_gone = [&](int32_t r) {
    return static_cast<size_t>(r) < gone.size() && gone[static_cast<size_t>(r)];
  };
  if (is_gone(a) || is_gone(b))
    return false;
  if (mesh())
    return true;
  // Climb from the deeper end until both meet; every rank passed is on the
  // path.
  while (a != b) {
    auto& deeper = depth_[static_cast<size_t>(a)] >= depth_[static_cast<size_t>(b)] ? a : b;
    deeper = parents_[static_cast<size_t>(deeper)];
    if (is_gone(deeper))
      return false;
  }
  return true;
}

std::string published_endpoint::encode() const {
  return address + " links=" + std::to_string(fanout) + " on=" + hostname;
}

published_endpoint published_endpoint::decode(const std::string& text) {
  std::istringstream in{text};
  published_endpoint out;
  in >> out.address;
  const auto colon = out.address.rfind(':');
  if (colon == std::string::npos || colon + 1 == out.address.size())
    throw std::invalid_argument("malformed endpoint address '" + text + "'");
  out.port();
  bool fanout = false;
  for (std::string field; in >> field;) {
    if (field.rfind("links=", 0) == 0) {
      size_t used = 0;
      const auto value = field.substr(6);
      out.fanout = std::stoi(value, &used);
      fanout = used == value.size();
    } else if (field.rfind("on=", 0) == 0) {
      out.hostname = field.substr(3);
    }
  }
  if (!fanout || out.hostname.empty())
    throw std::invalid_argument("malformed endpoint '" + text + "'");
  return out;
}

std::string published_endpoint::host() const {
  return address.substr(0, address.rfind(':'));
}

uint16_t published_endpoint::port() const {
  size_t used = 0;
  const auto text = address.substr(address.rfind(':') + 1);
  const auto port = std::stoi(text, &used);
  if (used != text.size() || port <= 0 || port > 65535)
    throw std::invalid_argument("malformed port in endpoint address '" + address + "'");
  return static_cast<uint16_t>(port);
}

} // namespace troupe::control
