#include "elastic/elastic_plan.hpp"

#include <sstream>
#include <stdexcept>

namespace troupe::elastic {

namespace {

const char* change_names[] = {"none", "added", "removed", "mixed"};

} // namespace

std::string plan_key(const std::string& job, int64_t epoch) {
  return job + "/plan/" + std::to_string(epoch);
}

std::string arrive_prefix(const std::string& job, int64_t epoch) {
  return job + "/arrive/" + std::to_string(epoch) + "/";
}

std::string arrive_key(const std::string& job, int64_t epoch, int64_t worker_id) {
  return arrive_prefix(job, epoch) + std::to_string(worker_id);
}

std::string barrier_key(const std::string& job, int64_t epoch) {
  return job + "/barrier/" + std::to_string(epoch);
}

std::string notice_key(const std::string& job) {
  return job + "/notice";
}

std::string host_states_key(const std::string& job) {
  return job + "/hosts";
}

std::string encode_host_states(const host_states& h) {
  return std::to_string(h.active) + " " + std::to_string(h.blacklisted) + " " +
         std::to_string(h.cooling_down);
}

std::optional<host_states> decode_host_states(const std::string& text) {
  std::istringstream in{text};
  host_states h;
  std::string rest;
  if (!(in >> h.active >> h.blacklisted >> h.cooling_down) || (in >> rest) || h.active < 0 ||
      h.blacklisted < 0 || h.cooling_down < 0)
    return std::nullopt;
  return h;
}

std::string encode_plan(const membership_plan& plan) {
  std::string out;
  for (const auto& m : plan)
    out += std::to_string(m.worker_id) + " " + m.host + "\n";
  return out;
}

membership_plan decode_plan(const std::string& text) {
  membership_plan plan;
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields{line};
    plan_member m;
    std::string rest;
    if (!(fields >> m.worker_id >> m.host) || (fields >> rest) || m.worker_id < 0)
      throw std::invalid_argument("malformed membership plan line '" + line + "'");
    plan.push_back(std::move(m));
  }
  return plan;
}

std::string encode_arrival(const arrival& a) {
  std::string out = a.veteran ? "1" : "0";
  for (size_t i = 0; i < a.lost.size(); ++i)
    out += (i == 0 ? " " : ",") + std::to_string(a.lost[i]);
  return out;
}

arrival decode_arrival(const std::string& text) {
  arrival a;
  std::istringstream in{text};
  std::string flag, lost;
  if (!(in >> flag) || (flag != "0" && flag != "1"))
    return a;
  a.veteran = flag == "1";
  if (in >> lost) {
    std::istringstream ranks{lost};
    std::string rank;
    while (std::getline(ranks, rank, ','))
      try {
        a.lost.push_back(std::stoi(rank));
      } catch (const std::exception&) {
        return {a.veteran, {}};
      }
  }
  return a;
}

std::string encode_notice(const notice& n) {
  return std::to_string(n.epoch) + " " + change_names[static_cast<int>(n.change)];
}

std::optional<notice> decode_notice(const std::string& text) {
  std::istringstream in{text};
  notice n;
  std::string kind;
  if (!(in >> n.epoch >> kind))
    return std::nullopt;
  for (int i = 1; i < 4; ++i)
    if (kind == change_names[i]) {
      n.change = static_cast<host_change>(i);
      return n;
    }
  return std::nullopt;
}

} // namespace troupe::elastic
