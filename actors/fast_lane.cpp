// The fast lane (docs/architecture.md, "Agreement without the
// coordinator"): a member's side of agreeing on cached allreduces on the
// control channel's arrival board.

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/negotiator_state.hpp"
#include "control/shm_channel.hpp"
#include "ipc/futex.hpp"
#include "metrics/rank_metrics.hpp"
#include "proto/agreed_response.hpp"
#include "proto/fusion.hpp"
#include "proto/request_checks.hpp"

namespace troupe::actors::negotiation {

// Posts this rank's arrival for a cached allreduce, broadcast, allgather,
// alltoall or reducescatter on the channel's board when the fast lane is on (every member reads the
// channel, the set is a star, nobody joined). What
// agreed_without_coordinator() leaves out, and a joined rank (which asks
// for nothing), go the slow way; so does an allgather whose ranks' first
// dimensions this view lacks (every member's view of an id's version is
// the same: all decide alike).
arrival post_arrival(negotiator_state& st, const tensor_entry_ptr& e, cache_ref ref) {
  auto* board = st.board();
  const auto& request = e->request;
  if (!st.lane_on || !board || st.joined || !agreed_without_coordinator(request) ||
      (request.op() == v1::OP_TYPE_ALLGATHER &&
       st.cache.first_dims(request.tensor_name()).size() != static_cast<size_t>(st.set_size)))
    return arrival::slow;
  // Another tensor's post under this id outlived the list that moved the id
  // (repost_changed drops such posts): the coordinator sorts it out.
  if (auto held = st.posted.find(ref.id); held != st.posted.end() && held->second.entry != e)
    return arrival::slow;
  const auto outcome = board->post(ref.id, ref.list, st.set_rank);
  if (outcome == control::arrival_board::outcome::no_slot)
    return arrival::slow;
  st.posted.insert_or_assign(ref.id, negotiator_state::posted_arrival{ref.list, e});
  if (outcome == control::arrival_board::outcome::completed)
    return arrival::agreed;
  st.channel->expect_reply();  // the agreed list of the member that completes it
  return arrival::waiting;
}

namespace {

// Every rank's first dimension of `request`'s tensor, registered as `name`,
// as this member's cache view keeps them for an allgather; none (and no
// lookup) for any other op.
const std::vector<int64_t>& gathered_dims(const negotiator_state& st, const v1::Request& request,
                                          const std::string& name) {
  static const std::vector<int64_t> none;
  return request.op() == v1::OP_TYPE_ALLGATHER ? st.cache.first_dims(name) : none;
}

// Whether the negotiator has handled every list the channel's reader passed
// on.
bool caught_up(const negotiator_state& st) {
  return st.channel_delivered->load(std::memory_order_acquire) == st.channel_handled;
}

} // namespace

// Writes the agreed list for the tensors whose arrival this rank completed,
// once its backends run nothing (see negotiator_state::completed), grouped
// as the fusion threshold in force fuses them: every member runs each group
// as one work (leaving out the ids that no longer name what they named here
// when the list reaches it). Writing later is always safe; not writing
// would leave every member waiting.
void write_agreed(negotiator_self self) {
  auto& st = self->state;
  if (st.completed.empty() || !st.in_flight.empty() || !caught_up(st) || st.channel->unread())
    return;
  const auto completed = std::exchange(st.completed, {});
  std::vector<const v1::Request*> requests;
  std::vector<int64_t> sizes;  // as fusion counts them
  requests.reserve(completed.size());
  sizes.reserve(completed.size());
  for (const auto& c : completed) {
    const auto& request = c.second->request;
    requests.push_back(&request);
    sizes.push_back(fusion_bytes(request, gathered_dims(st, request, request.tensor_name())));
  }
  v1::ResponseList list;
  list.set_process_set_id(st.set_id);
  for (const auto& group : fusion_groups(requests, sizes, st.lane_fusion)) {
    for (auto i : group) {
      list.add_agreed_ids(completed[i].first.id);
      list.add_agreed_lists(completed[i].first.list);
    }
    list.add_agreed_group_sizes(static_cast<uint32_t>(group.size()));
  }
  auto bytes = list.SerializeAsString();
  // Next in the stream here too: run it now, without this rank's reader.
  if (st.channel->agree_inline(bytes, [&st] { return caught_up(st); })) {
    on_agreed_list(self, list);
    return;
  }
  retry_channel_unless(self, st.channel->agree(std::move(bytes)));
}

// How long a bound rank's negotiator polls for an agreed list it waits for
// (at most its reader's window): the list usually comes within
// microseconds of the last member's arrival, and this thread is the rank's
// one scheduler thread, which nothing else gets meanwhile.
constexpr std::chrono::microseconds agreed_poll{200};

// The wait for the agreed list that completes this rank's arrivals, on a
// bound rank: this thread takes the list from the channel itself, or finds
// it in its mailbox as the reader passed it on, instead of being woken for
// it after the reader's hand-over. The reader meanwhile neither polls nor
// is woken (taking_scope): this thread has the rank's CPU to itself, and
// the writer pays no wake. Only where small works run here (the global
// set), and only while nothing else is due here. Measured in
// docs/architecture.md, "Small works on the negotiator's thread".
void await_agreed(negotiator_self self) {
  auto& st = self->state;
  if (st.channel_poll.count() == 0 || !st.runs_small_works || !st.channel || !st.lane_on ||
      st.await_spent || st.posted.empty() || !st.completed.empty() || !st.in_flight.empty() ||
      st.broken || !st.children.empty())
    return;
  std::vector<std::string> lists;
  {
    const control::channel_member::taking_scope taking{*st.channel};
    ipc::poll_for(
      [&] {
        if (!self->mailbox().empty())
          return true;
        if (st.channel->unread())
          lists = st.channel->take_inline([&st] { return caught_up(st); });
        return !lists.empty();
      },
      std::min(agreed_poll, st.channel_poll), std::chrono::microseconds(0));
  }
  // (A list in the mailbox may be the agreed list: on_agreed_list resets it.)
  st.await_spent = lists.empty();
  // Counted as the reader's are: while one is left, none this rank writes
  // may go ahead of it (write_agreed, agree_inline).
  st.channel_delivered->fetch_add(lists.size(), std::memory_order_release);
  for (const auto& bytes : lists)
    on_channel_list(self, bytes);
}

void on_channel_list(negotiator_self self, const std::string& bytes) {
  on_response_list(self, bytes);
  ++self->state.channel_handled;
  write_agreed(self);
}

// After a response list: what this rank posted for an id that list changed
// (or with the lane now off) can no longer be agreed on the board; it asks
// again (by the board or the coordinator, as the cache now says).
void repost_changed(negotiator_self self) {
  auto& st = self->state;
  bool again = false;
  for (auto it = st.posted.begin(); it != st.posted.end();) {
    const auto& e = it->second.entry;
    const bool pending = !e->handle->done();
    if (pending && st.lane_on && st.cache.name_of(it->first, it->second.list)) {
      ++it;
      continue;
    }
    if (pending) {
      st.outbox.push_back(e);
      again = true;
    }
    // Its bit would otherwise stay on the board and, once the lane is on
    // again with the id unchanged (a list with a joined rank caches
    // nothing), complete a later round without this rank.
    if (auto* board = st.board())
      board->withdraw(it->first, it->second.list, st.set_rank);
    it = st.posted.erase(it);
  }
  if (again)
    flush_soon(self);
}

// An agreed list (another member's, or this rank's own, back through the
// channel in the order every member reads): runs what it agreed, each group
// as one work. An id that no longer names what it named for its writer (a
// list before it in the stream changed it) is left out on every member
// alike; their posters ask again (repost_changed).
void on_agreed_list(negotiator_self self, const v1::ResponseList& list) {
  auto& st = self->state;
  if (st.broken)
    return;  // what it names failed here already
  int64_t grouped = 0;
  for (auto n : list.agreed_group_sizes())
    grouped += n;
  if (list.agreed_lists_size() != list.agreed_ids_size() || grouped != list.agreed_ids_size() ||
      list.responses_size() > 0) {
    spdlog::error("negotiator of set {}: dropped a malformed agreed list ({} ids, {} versions, "
                  "{} in groups)",
                  st.set_id, list.agreed_ids_size(), list.agreed_lists_size(), grouped);
    return;
  }
  st.await_spent = false;
  if (!st.lane_on)
    return list_done(st, self, {}, true);  // nothing counts: its posters asked again
  mark_cycle(st);
  const auto now = std::chrono::steady_clock::now();
  int at = 0;
  size_t launched = 0;
  for (auto size : list.agreed_group_sizes()) {
    // The group's valid tensors as one response, in the group's order.
    v1::Response resp;
    auto work = std::make_shared<collective_work>();
    work->entries.reserve(size);
    bool fuses = true;
    for (const int end = at + static_cast<int>(size); at < end; ++at) {
      const auto id = list.agreed_ids(at);
      const auto name = st.cache.name_of(id, list.agreed_lists(at));
      if (!name)
        continue;
      auto posted = st.posted.find(id);
      if (posted == st.posted.end() || posted->second.list != list.agreed_lists(at) ||
          posted->second.entry->handle->done()) {
        spdlog::error("negotiator of set {}: an agreed list names '{}' (cache id {}), which set "
                      "rank {} has not asked for; it does not run here",
                      st.set_id, *name, id, st.set_rank);
        continue;
      }
      auto e = std::move(posted->second.entry);
      st.posted.erase(posted);
      trace(self, *e, "E", e->request.op(), true);
      st.metrics->negotiated(e->submitted, now);
      const auto& first_dims = gathered_dims(st, e->request, *name);
      if (work->entries.empty())
        resp = e->request.op() == v1::OP_TYPE_ALLGATHER
                 ? agreed_allgather_of(*name, e->request, first_dims)
                 : agreed_response_of(*name, e->request);
      else
        fuses = fuses && append_agreed(resp, *name, e->request, first_dims);
      work->entries.push_back(std::move(e));
    }
    if (work->entries.empty())
      continue;
    // The backends index and allocate by what a response says (an
    // allgather's first dimensions came from this member's cache view).
    const auto wrong = fuses ? check_response(resp, st.set_size) : "tensors that do not fuse";
    if (!wrong.empty()) {
      const status s{status_code::internal,
                     fmt::format("process set {}: an agreed list grouped {} ('{}' ...)", st.set_id,
                                 wrong, work->entries.front()->request.tensor_name())};
      for (auto& e : work->entries)
        complete(st, e, s);
      continue;
    }
    const auto tensors = work->entries.size();
    if (launch(self, std::move(resp), work)) {
      ++launched;
      st.metrics->fast_lane_agreed(tensors);
    }
  }
  if (launched == 0)
    list_done(st, self, {}, true);
  else
    st.lists_running.push_back({launched, {}, true});
  ran_here_done(self);
}

} // namespace troupe::actors::negotiation
