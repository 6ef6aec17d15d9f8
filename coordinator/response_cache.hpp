#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/cached_tensor.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {

/// The coordinator's response cache for one process set (Horovod's
/// ResponseCache, without its lockstep bit vectors): every member's request
/// for a tensor that was negotiated successfully, under a small id. A member
/// that submits the same tensor again with the same parameters sends only
/// that id; the coordinator resolves it to the stored tensor, whose
/// requests agreed when they were cached, so a hit is counted, not checked
/// or copied.
///
/// Ids are assigned here and travel to every member in the response list
/// (Response.cache_ids), which members apply in list order: ids agree on
/// every rank by construction. Capacity bounds the entries (LRU eviction,
/// evicted ids are reused); 0 disables the cache.
///
/// Members apply lists later than the coordinator emits them, so a member
/// may still send an id that has since been evicted or reassigned. Each
/// request says how many lists its sender had applied; entries are kept
/// (retired) until every member has moved past the list that dropped them,
/// and an id is resolved against the state the sender saw.
class response_cache {
public:
  using requests = coordinator::requests;

  response_cache(size_t capacity, int32_t set_size);

  bool enabled() const {
    return capacity_ > 0;
  }

  /// Records the requests of a successfully negotiated tensor in list
  /// number `list_seq` and returns its id (the existing one when the name is
  /// cached, then marked most recently used). Evicts the least recently
  /// used entry when full. 0 when disabled, or when a member sent no
  /// request (it joined): such a tensor is not cached.
  uint32_t put(const std::string& name, requests by_rank, uint64_t list_seq);

  /// What put() does when every member named `tensor` by id: marks it most
  /// recently used and returns its id, without comparing requests (they
  /// are the stored ones). Puts it again if it has left the cache since.
  uint32_t touch(const cached_tensor_ptr& tensor, uint64_t list_seq);

  /// The live entry of `name` (null when the cache has none).
  cached_tensor_ptr find(const std::string& name) const;

  /// The live entry under `id` if the list that last named it (wrote its
  /// id into Response.cache_ids) has the version `list_version` of an
  /// arrival board word (control::arrival_board::version_of); else null.
  cached_tensor_ptr named_in(uint32_t id, uint32_t list_version) const;

  /// Drops a tensor (its negotiation failed) as of list `list_seq`.
  void erase(const std::string& name, uint64_t list_seq);

  /// The tensor that cache id `id` named for a member (set rank `rank`)
  /// that had applied `lists_applied` lists; null for an id that state
  /// never had or a rank outside the set.
  cached_tensor_ptr resolve(uint32_t id, int32_t rank, uint64_t lists_applied) const;

  /// Notes that set ranks [first, end) have applied `lists_applied` lists
  /// at least; retired entries no member can refer to any more are
  /// released.
  void member_progress(int64_t first, int64_t end, uint64_t lists_applied);

  /// Empties the cache as of list `list_seq` and gives it `capacity`
  /// entries from then on (0 = off). Members that have not applied that
  /// list yet still resolve their ids against the old entries.
  void reset(size_t capacity, uint64_t list_seq);

  /// Hits the coordinator does not see (agreed on the arrival board) keep
  /// an entry as a hit here would: before evicting the least recently used
  /// entry, `used(id)` is asked whether it was used since last asked; if so
  /// it moves to the front instead (a second chance: each entry is asked at
  /// most once per eviction).
  void spare_if(std::function<bool(uint32_t id)> used) {
    used_elsewhere_ = std::move(used);
  }

  /// True once, at the first eviction (Horovod prints a warning then).
  bool take_first_eviction();

  size_t size() const {
    return by_name_.size();
  }
  size_t retired() const {
    return retired_.size();
  }

private:
  struct entry {
    cached_tensor_ptr tensor;
    uint32_t id = 0;
    uint64_t valid_from = 0;  // first list seq whose state contains it
    uint64_t valid_until = UINT64_MAX;  // first list seq whose state lacks it
    uint64_t named = 0;  // the last list seq that wrote its id
  };

  // The entry to evict: the least recently used one not used elsewhere.
  std::list<entry>::iterator victim();

  // Moves an entry out of the live state as of list `list_seq`; its id is
  // freed unless `keep_id`.
  void retire(std::list<entry>::iterator it, uint64_t list_seq, bool keep_id);

  size_t capacity_;
  std::list<entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<entry>::iterator> by_name_;
  std::unordered_map<uint32_t, std::list<entry>::iterator> by_id_;
  std::vector<uint32_t> free_ids_;
  uint32_t next_id_ = 1;
  std::vector<entry> retired_;
  std::vector<uint64_t> applied_;  // per member
  std::function<bool(uint32_t)> used_elsewhere_;
  bool evicted_ = false;
  bool eviction_reported_ = false;
};

} // namespace troupe::coordinator
