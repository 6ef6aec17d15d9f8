#include <deque>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "actors/cache_view.hpp"
#include "control/arrival_board.hpp"
#include "coordinator/message_table.hpp"
#include "coordinator/response_cache.hpp"

namespace troupe::coordinator {
namespace {

v1::Request request(const std::string& name, int32_t rank, int64_t length) {
  v1::Request r;
  r.set_tensor_name(name);
  r.set_request_rank(rank);
  r.set_op(v1::OP_TYPE_ALLREDUCE);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  r.add_shape(length);
  return r;
}

response_cache::requests both(const std::string& name, int64_t length) {
  return {std::make_shared<const v1::Request>(request(name, 0, length)),
          std::make_shared<const v1::Request>(request(name, 1, length))};
}

// A member keeps every rank's first dimension of a cached allgather (the
// fast lane builds its response from them), per tensor of a fused response,
// and takes new ones when the id is named again although its own request
// did not change (another rank's did).
TEST(cache_view, keeps_every_ranks_first_dimension_of_a_cached_allgather) {
  const auto gather = [](const std::string& name, int64_t rows) {
    v1::Request r;
    r.set_tensor_name(name);
    r.set_op(v1::OP_TYPE_ALLGATHER);
    r.set_dtype(v1::DATA_TYPE_INT32);
    r.add_shape(rows);
    r.add_shape(3);
    return r;
  };
  const auto mine_a = gather("a", 2), mine_b = gather("b", 1);
  const auto local = [&](const std::string& name) { return name == "a" ? &mine_a : &mine_b; };
  v1::ResponseList list;
  auto* fused = list.add_responses();  // a and b fused: each tensor's ranks in turn
  fused->set_op(v1::OP_TYPE_ALLGATHER);
  for (const char* name : {"a", "b"})
    fused->add_tensor_names(name);
  for (int64_t rows : {2, 5, 1, 4})
    fused->add_tensor_sizes(rows);
  fused->add_cache_ids(1);
  fused->add_cache_ids(2);
  actors::cache_view view;
  view.apply(list, local);
  EXPECT_EQ(view.first_dims("a"), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(view.first_dims("b"), (std::vector<int64_t>{1, 4}));
  EXPECT_TRUE(view.first_dims("c").empty());

  v1::ResponseList again;  // rank 1 changed a's rows; this rank did not
  auto* single = again.add_responses();
  single->set_op(v1::OP_TYPE_ALLGATHER);
  single->add_tensor_names("a");
  single->add_tensor_sizes(2);
  single->add_tensor_sizes(7);
  single->add_cache_ids(1);
  view.apply(again, local);
  EXPECT_EQ(view.first_dims("a"), (std::vector<int64_t>{2, 7}));
  EXPECT_TRUE(view.hit(mine_a));
}

TEST(response_cache, same_tensor_keeps_its_id_and_new_tensors_reuse_evicted_ids) {
  response_cache cache(2, 2);
  EXPECT_EQ(cache.put("a", both("a", 4), 1), 1u);
  EXPECT_EQ(cache.put("b", both("b", 4), 1), 2u);
  EXPECT_EQ(cache.put("a", both("a", 4), 2), 1u);  // a is now most recently used
  EXPECT_FALSE(cache.take_first_eviction());
  EXPECT_EQ(cache.put("c", both("c", 4), 3), 2u);  // evicts b, reuses its id
  EXPECT_TRUE(cache.take_first_eviction());
  EXPECT_FALSE(cache.take_first_eviction());  // the warning is printed once
  EXPECT_EQ(cache.resolve(2, 1, 3)->name, "c");
  EXPECT_EQ(cache.resolve(2, 1, 2)->name, "b");  // a member two lists behind
  EXPECT_EQ(cache.resolve(1, 0, 3)->name, "a");
  EXPECT_FALSE(cache.resolve(2, 0, 0));  // before any list: no id existed
  EXPECT_FALSE(cache.resolve(7, 0, 3));
}

// Entries agreed on the arrival board are used without the coordinator
// seeing it: asked before eviction, they get a second chance, and the
// least recently used entry nobody used goes instead.
TEST(response_cache, entries_used_elsewhere_are_spared_from_eviction) {
  response_cache cache(3, 2);
  std::set<uint32_t> used;
  std::vector<uint32_t> asked;
  cache.spare_if([&](uint32_t id) {
    asked.push_back(id);
    return used.erase(id) > 0;
  });
  cache.put("a", both("a", 4), 1);  // id 1, the oldest
  cache.put("b", both("b", 4), 1);  // id 2
  cache.put("c", both("c", 4), 1);  // id 3
  used = {1, 2};                    // a and b agreed on the board since
  EXPECT_EQ(cache.put("d", both("d", 4), 2), 3u);  // c goes, its id is reused
  EXPECT_EQ(asked, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(cache.find("c"), nullptr);
  ASSERT_NE(cache.find("a"), nullptr);
  // Their flags are taken: with nothing used since, a (spared first, now
  // the oldest) goes next. Its id was written by list 1 and stays so.
  EXPECT_EQ(cache.named_in(1, control::arrival_board::version_of(1)), cache.find("a"));
  EXPECT_EQ(cache.named_in(1, control::arrival_board::version_of(2)), nullptr);
  asked.clear();
  EXPECT_EQ(cache.put("e", both("e", 4), 3), 1u);
  EXPECT_EQ(asked, (std::vector<uint32_t>{1}));
  EXPECT_EQ(cache.find("a"), nullptr);
  // Every entry used: after one round of asking, the oldest goes anyway.
  used = {2, 3, 1};
  asked.clear();
  EXPECT_EQ(cache.put("f", both("f", 4), 4), 2u);
  EXPECT_EQ(asked, (std::vector<uint32_t>{2, 3, 1}));
  EXPECT_EQ(cache.find("b"), nullptr);
}

TEST(response_cache, changed_parameters_and_failures_are_seen_only_by_later_states) {
  response_cache cache(4, 2);
  cache.put("a", both("a", 4), 1);
  EXPECT_EQ(cache.put("a", both("a", 8), 2), 1u);  // new shape, same id
  EXPECT_EQ(cache.resolve(1, 0, 1)->by_rank[0]->shape(0), 4);
  EXPECT_EQ(cache.resolve(1, 0, 2)->by_rank[0]->shape(0), 8);
  cache.erase("a", 3);
  EXPECT_FALSE(cache.resolve(1, 0, 3));
  EXPECT_EQ(cache.resolve(1, 0, 2)->by_rank[0]->shape(0), 8);
  // Retired states go once every member has applied the lists past them.
  cache.member_progress(0, 1, 3);
  EXPECT_EQ(cache.retired(), 2u);
  cache.member_progress(1, 2, 3);
  EXPECT_EQ(cache.retired(), 0u);
}

TEST(response_cache, capacity_zero_caches_nothing) {
  response_cache cache(0, 2);
  EXPECT_FALSE(cache.enabled());
  EXPECT_EQ(cache.put("a", both("a", 4), 1), 0u);
  EXPECT_EQ(cache.size(), 0u);
}

// Coordinator and members as the actors use them, with members applying
// lists late and submitting with whatever view they have: every id a member
// sends must resolve to the request it meant, for 10 000 lists with shape
// changes, failures and a capacity of 1 or 3.
void simulate(size_t capacity, unsigned seed) {
  constexpr int members = 3;
  std::mt19937 gen(seed);
  response_cache cache(capacity, members);
  std::vector<actors::cache_view> views(members);
  // Lists not yet applied, with the requests each member sent for them.
  std::vector<std::deque<std::pair<v1::ResponseList, response_cache::requests>>> inbox(members);
  uint64_t seq = 0;
  size_t hits = 0;
  for (int step = 0; step < 10000; ++step) {
    // Each member applies some of its pending lists.
    for (int m = 0; m < members; ++m)
      for (auto n = std::uniform_int_distribution<size_t>(0, inbox[m].size())(gen); n > 0; --n) {
        const auto& [list, sent] = inbox[m].front();
        views[m].apply(list, [&](const std::string&) { return &*sent[static_cast<size_t>(m)]; });
        inbox[m].pop_front();
      }
    // One tensor, negotiated: every member submits (hit or full request).
    const std::string name = "t" + std::to_string(gen() % 5);
    const int64_t length = 1 + static_cast<int64_t>(step / 97 % 2);
    response_cache::requests by_rank(members);
    for (int m = 0; m < members; ++m) {
      auto req = request(name, m, length);
      if (auto ref = views[m].hit(req)) {
        ++hits;
        auto resolved = cache.resolve(ref.id, m, views[m].lists_applied());
        ASSERT_TRUE(resolved) << "step " << step;
        // The list that last named the id resolves to the same tensor (what
        // a control-tree aggregate of several members carries).
        ASSERT_EQ(cache.resolve(ref.id, m, ref.list), resolved) << "step " << step;
        ASSERT_EQ(resolved->name, name) << "step " << step;
        ASSERT_EQ(resolved->by_rank[static_cast<size_t>(m)]->shape(0), length) << "step " << step;
      }
      cache.member_progress(m, m + 1, views[m].lists_applied());
      by_rank[static_cast<size_t>(m)] = std::make_shared<const v1::Request>(req);
    }
    v1::ResponseList list;
    auto* resp = list.add_responses();
    resp->add_tensor_names(name);
    ++seq;
    if (step % 31 == 0) {  // a failed negotiation drops the tensor
      resp->set_op(v1::OP_TYPE_ERROR);
      cache.erase(name, seq);
    } else {
      resp->set_op(v1::OP_TYPE_ALLREDUCE);
      resp->add_cache_ids(cache.put(name, by_rank, seq));
    }
    for (auto& box : inbox)
      box.emplace_back(list, by_rank);
  }
  EXPECT_GT(hits, 1000u);
}

TEST(response_cache, lagging_members_resolve_to_what_they_meant_capacity_1) {
  simulate(1, 1);
}

TEST(response_cache, lagging_members_resolve_to_what_they_meant_capacity_3) {
  simulate(3, 2);
}

} // namespace
} // namespace troupe::coordinator

namespace troupe::coordinator {
namespace {

TEST(response_cache, reset_empties_it_but_lagging_members_still_resolve) {
  response_cache cache(4, 2);
  cache.put("a", both("a", 4), 1);
  cache.put("b", both("b", 4), 1);
  cache.reset(1, 2);  // list 2 carries the new capacity
  EXPECT_EQ(cache.size(), 0u);
  // A member that had applied list 1 only still means "a".
  EXPECT_EQ(cache.resolve(1, 0, 1)->name, "a");
  EXPECT_FALSE(cache.resolve(1, 0, 2));
  // New ids from list 2 on; capacity 1 evicts.
  const auto id = cache.put("c", both("c", 4), 2);
  EXPECT_EQ(cache.resolve(id, 1, 2)->name, "c");
  cache.put("d", both("d", 4), 3);
  EXPECT_EQ(cache.size(), 1u);
  cache.reset(0, 4);
  EXPECT_FALSE(cache.enabled());
  EXPECT_EQ(cache.put("e", both("e", 4), 4), 0u);
  cache.reset(8, 5);
  EXPECT_TRUE(cache.enabled());
  EXPECT_NE(cache.put("e", both("e", 4), 5), 0u);
}

// Members that name cached tensors by id get exactly the response their
// full requests would have got: the message table's hit path against
// make_response on what each member meant, over random submission orders,
// lagging members, shape changes, evictions and mismatches.
void agree_over_random_steps(size_t capacity, unsigned seed, int steps) {
  constexpr int members = 3;
  constexpr int tensors_per_step = 3;
  std::mt19937 gen(seed);
  message_table table(members);
  response_cache cache(capacity, members);
  std::vector<actors::cache_view> views(members);
  // Lists each member has not applied yet, with the requests it sent.
  std::vector<std::deque<std::pair<v1::ResponseList, std::map<std::string, v1::Request>>>> inbox(
    members);
  uint64_t seq = 0;
  size_t hits = 0, fast = 0, errors = 0;
  for (int step = 0; step < steps; ++step) {
    for (int m = 0; m < members; ++m)
      for (auto n = std::uniform_int_distribution<size_t>(0, inbox[m].size())(gen); n > 0; --n) {
        const auto& [list, sent] = inbox[m].front();
        views[m].apply(list, [&](const std::string& name) { return &sent.at(name); });
        inbox[m].pop_front();
      }
    // Distinct tensors this step; each member's request for each.
    std::vector<std::string> names;
    while (names.size() < tensors_per_step) {
      auto name = "t" + std::to_string(gen() % 8);
      if (std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(name);
    }
    std::map<std::string, message_table::requests> meant;
    for (const auto& name : names) {
      // Shapes flip between two values, and now and then one member keeps
      // the other one: members that lag still hold both versions, so hits
      // on different versions of a tensor happen too.
      const int64_t length = 1 + static_cast<int64_t>(gen() % 2);
      auto& by_rank = meant[name];
      for (int m = 0; m < members; ++m) {
        const bool odd_one = gen() % 13 == 0;
        by_rank.push_back(
          std::make_shared<const v1::Request>(request(name, m, odd_one ? 3 - length : length)));
      }
    }
    // Every member submits every tensor, interleaved at random.
    std::vector<std::pair<int, std::string>> submissions;
    for (int m = 0; m < members; ++m)
      for (const auto& name : names)
        submissions.emplace_back(m, name);
    std::shuffle(submissions.begin(), submissions.end(), gen);
    for (const auto& [m, name] : submissions) {
      const auto& req = *meant[name][static_cast<size_t>(m)];
      std::optional<std::string> err;
      if (auto ref = views[m].hit(req)) {
        ++hits;
        auto tensor = cache.resolve(ref.id, m, views[m].lists_applied());
        ASSERT_TRUE(tensor) << "step " << step;
        err = table.add_hit(m, tensor);
      } else {
        err = table.add(req);
      }
      ASSERT_FALSE(err) << *err;
      cache.member_progress(m, m + 1, views[m].lists_applied());
    }
    // Pop, check against what the members meant, record as the coordinator.
    v1::ResponseList list;
    ++seq;
    while (table.has_ready()) {
      message_table::sent sent;
      auto resp = table.pop_ready(&sent);
      const auto& name = resp.tensor_names(0);
      ASSERT_EQ(resp.SerializeAsString(), make_response(name, meant[name]).SerializeAsString())
        << "step " << step << " tensor " << name;
      if (resp.op() == v1::OP_TYPE_ERROR) {
        ++errors;
        cache.erase(name, seq);
      } else {
        fast += sent.cached ? 1 : 0;
        resp.add_cache_ids(sent.cached ? cache.touch(sent.cached, seq)
                                       : cache.put(name, std::move(sent.by_rank), seq));
      }
      *list.add_responses() = std::move(resp);
    }
    ASSERT_EQ(list.responses_size(), tensors_per_step) << "step " << step;
    for (int m = 0; m < members; ++m) {
      std::map<std::string, v1::Request> sent;
      for (const auto& name : names)
        sent[name] = *meant[name][static_cast<size_t>(m)];
      inbox[m].emplace_back(list, std::move(sent));
    }
  }
  EXPECT_GT(hits, static_cast<size_t>(steps));
  EXPECT_GT(fast, static_cast<size_t>(steps / 50));
  EXPECT_GT(errors, 0u);
}

TEST(hit_agreement, cached_responses_equal_checked_ones_capacity_2) {
  agree_over_random_steps(2, 11, 100000);
}

TEST(hit_agreement, cached_responses_equal_checked_ones_capacity_8) {
  agree_over_random_steps(8, 12, 100000);
}

} // namespace
} // namespace troupe::coordinator
