#include "elastic/launcher/host_plan.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

namespace troupe::elastic::launcher {

namespace {

std::string trim(const std::string& text) {
  auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos)
    return {};
  auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

int parse_slots(const std::string& text, const std::string& context) {
  bool digits = !text.empty()
                && std::all_of(text.begin(), text.end(), [](unsigned char c) {
                     return std::isdigit(c) != 0;
                   });
  if (digits && text.size() <= 6) {
    int slots = std::stoi(text);
    if (slots > 0)
      return slots;
  }
  throw plan_error(context + ": slot count '" + text
                   + "' is not a positive integer");
}

// "host" or "host:slots". The last colon splits, so the name itself may not
// contain one (bracketed IPv6 is not supported, like horovodrun).
host_spec parse_host_entry(const std::string& entry,
                           const std::string& context) {
  host_spec spec;
  auto colon = entry.rfind(':');
  spec.name = trim(entry.substr(0, colon));
  if (colon != std::string::npos)
    spec.slots = parse_slots(trim(entry.substr(colon + 1)), context);
  if (spec.name.empty())
    throw plan_error(context + ": missing host name in '" + entry + "'");
  return spec;
}

} // namespace

std::vector<host_spec> parse_host_list(const std::string& text) {
  std::vector<host_spec> hosts;
  std::stringstream in{text};
  std::string entry;
  while (std::getline(in, entry, ','))
    hosts.push_back(parse_host_entry(trim(entry), "host list '" + text + "'"));
  if (hosts.empty())
    throw plan_error("host list is empty");
  return hosts;
}

std::vector<host_spec> parse_hostfile(std::istream& in,
                                      const std::string& source) {
  std::vector<host_spec> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty())
      continue;
    auto context = source + ":" + std::to_string(number);
    std::istringstream words{line};
    std::string name;
    std::string extra;
    words >> name >> extra;
    if (extra.empty()) {
      hosts.push_back(parse_host_entry(name, context));
      continue;
    }
    std::string trailing;
    if (extra.rfind("slots=", 0) != 0 || (words >> trailing))
      throw plan_error(context + ": expected 'host slots=N' or 'host:N', got '"
                       + line + "'");
    hosts.push_back({name, parse_slots(extra.substr(6), context)});
  }
  if (hosts.empty())
    throw plan_error(source + ": no hosts listed");
  return hosts;
}

std::vector<rank_slot> plan_ranks(const std::vector<host_spec>& hosts,
                                  int np) {
  if (np <= 0)
    throw plan_error("the number of ranks must be positive, got "
                     + std::to_string(np));
  int total = 0;
  std::map<std::string, int> seen;
  for (const auto& h : hosts) {
    if (seen[h.name]++ > 0)
      throw plan_error("host '" + h.name + "' is listed more than once");
    total += h.slots;
  }
  if (np > total)
    throw plan_error("asked for " + std::to_string(np) + " ranks but the hosts "
                     + "provide only " + std::to_string(total) + " slots");
  std::vector<rank_slot> ranks;
  std::map<int, int> hosts_with_local_rank;
  int host_index = 0;
  for (const auto& h : hosts) {
    if (static_cast<int>(ranks.size()) == np)
      break;
    int local_size = std::min(h.slots, np - static_cast<int>(ranks.size()));
    for (int local = 0; local < local_size; ++local) {
      rank_slot slot;
      slot.rank = static_cast<int>(ranks.size());
      slot.host = h.name;
      slot.host_index = host_index;
      slot.local_rank = local;
      slot.local_size = local_size;
      slot.cross_rank = hosts_with_local_rank[local]++;
      slot.machine_local_rank = local;
      ranks.push_back(slot);
    }
    ++host_index;
  }
  for (auto& slot : ranks)
    slot.cross_size = hosts_with_local_rank[slot.local_rank];
  return ranks;
}

void number_local_ranks_on_this_machine(std::vector<rank_slot>& ranks,
                                        const std::string& own_hostname) {
  int next = 0;
  for (auto& slot : ranks)
    if (is_local_host(slot.host, own_hostname))
      slot.machine_local_rank = next++;
}

bool is_local_host(const std::string& name, const std::string& own_hostname) {
  if (name == "localhost" || name == "::1" || name.rfind("127.", 0) == 0)
    return true;
  if (own_hostname.empty())
    return false;
  auto short_name = own_hostname.substr(0, own_hostname.find('.'));
  return name == own_hostname || name == short_name;
}

} // namespace troupe::elastic::launcher
