#include "workers/secret_agreement.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "workers/config.hpp"

namespace troupe::workers {
namespace {

// Each rank's offer, as the allgather hands them to every rank.
std::vector<std::string> offers_of(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (size_t r = 0; r < keys.size(); ++r)
    out.push_back(secret_offer(keys[r], static_cast<int>(r)));
  return out;
}

const std::string key_a = "0123456789abcdef-a";
const std::string key_b = "0123456789abcdef-b";

TEST(secret_agreement, the_same_key_on_every_rank_is_the_secret_and_never_travels) {
  const std::vector<std::string> keys{key_a, key_a, key_a};
  const auto offers = offers_of(keys);
  for (const auto& offer : offers) {
    EXPECT_EQ(offer.size(), 65u);  // "K" + a 64-digit fingerprint
    EXPECT_EQ(offer.find(key_a), std::string::npos);
  }
  EXPECT_EQ(offers[0], offers[1]);
  for (const auto& key : keys)
    EXPECT_EQ(secret_from_offers(offers, key), key_a);
}

TEST(secret_agreement, without_keys_every_rank_takes_rank_0s_draw) {
  const auto offers = offers_of({"", "", ""});
  EXPECT_EQ(offers[1], "-");
  const auto secret = secret_from_offers(offers, "");
  EXPECT_EQ(secret.size(), 64u);
  EXPECT_EQ(secret_from_offers(offers, ""), secret);
  EXPECT_NE(secret_from_offers(offers_of({"", ""}), ""), secret);  // a fresh draw per job
}

// The message every rank gets from these keys (each decides alike).
std::string failure(const std::vector<std::string>& keys) {
  const auto offers = offers_of(keys);
  std::string first;
  for (const auto& key : keys) {
    try {
      secret_from_offers(offers, key);
      ADD_FAILURE() << "no error for a rank with key '" << key << "'";
    } catch (const config_error& e) {
      if (first.empty())
        first = e.what();
      EXPECT_EQ(e.what(), first);
    }
  }
  return first;
}

TEST(secret_agreement, a_key_on_some_ranks_only_fails_every_rank_naming_them) {
  EXPECT_EQ(failure({"", key_a, "", key_a}),
            "TROUPE_SECRET_KEY is set on ranks 1, 3 but not on ranks 0, 2 of this mpirun job: "
            "pass it to every rank (mpirun -x TROUPE_SECRET_KEY) or to none");
  EXPECT_EQ(failure({key_a, ""}),
            "TROUPE_SECRET_KEY is set on rank 0 but not on rank 1 of this mpirun job: pass it "
            "to every rank (mpirun -x TROUPE_SECRET_KEY) or to none");
}

TEST(secret_agreement, different_keys_fail_every_rank_naming_who_holds_which) {
  const auto why = failure({key_a, key_b, key_a});
  EXPECT_NE(why.find("TROUPE_SECRET_KEY differs between the ranks of this mpirun job (2 keys, "
                     "held by "),
            std::string::npos)
    << why;
  EXPECT_NE(why.find("ranks 0, 2"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
  EXPECT_EQ(why.find(key_a), std::string::npos);  // the keys stay out of the message
}

} // namespace
} // namespace troupe::workers
