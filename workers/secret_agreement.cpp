#include "workers/secret_agreement.hpp"

#include <algorithm>
#include <map>

#include "elastic/job_secret.hpp"
#include "workers/config.hpp"

namespace troupe::workers {

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    out += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  return out;
}

} // namespace

std::string secret_offer(const std::string& key, int rank) {
  if (!key.empty())
    return "K" + elastic::to_hex(elastic::derive_key(key, "key fingerprint"));
  return rank == 0 ? "-" + elastic::random_secret() : "-";
}

std::string secret_from_offers(const std::vector<std::string>& offers, const std::string& key) {
  std::vector<int> without;
  std::map<std::string, std::vector<int>> by_key;  // fingerprint -> ranks
  for (size_t r = 0; r < offers.size(); ++r) {
    const auto& offer = offers[r];
    if (!offer.empty() && offer[0] == 'K')
      by_key[offer.substr(1)].push_back(static_cast<int>(r));
    else
      without.push_back(static_cast<int>(r));
  }
  if (by_key.empty())
    return offers.at(0).substr(1);
  if (!without.empty()) {
    std::vector<int> with;
    for (const auto& [print, ranks] : by_key)
      with.insert(with.end(), ranks.begin(), ranks.end());
    std::sort(with.begin(), with.end());
    throw config_error("TROUPE_SECRET_KEY is set on " + rank_list(with) + " but not on " +
                       rank_list(without) +
                       " of this mpirun job: pass it to every rank (mpirun -x TROUPE_SECRET_KEY) "
                       "or to none");
  }
  if (by_key.size() > 1) {
    std::string groups;
    for (const auto& [print, ranks] : by_key)
      groups += (groups.empty() ? "" : "; ") + rank_list(ranks);
    throw config_error("TROUPE_SECRET_KEY differs between the ranks of this mpirun job (" +
                       std::to_string(by_key.size()) + " keys, held by " + groups +
                       "): every rank needs the same one");
  }
  return key;
}

} // namespace troupe::workers
