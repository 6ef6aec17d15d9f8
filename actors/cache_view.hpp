#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe::actors {

/// A tensor's cache id as a member knows it, with the response list that
/// last named it (the state the id is resolved against; every member that
/// applied that list holds the same pair). Empty: the request goes in full.
struct cache_ref {
  uint32_t id = 0;
  uint64_t list = 0;
  explicit operator bool() const {
    return id != 0;
  }
};

/// A member's view of its process set's response cache (the coordinator
/// owns the cache, see coordinator/response_cache.hpp): which tensor holds
/// which id, with the request this rank sent for it. Updated from every
/// response list in list order, so every rank holds the same ids.
class cache_view {
public:
  /// Records the ids of one response list: uncached_names are dropped
  /// first, Response.cache_ids name the id each tensor got (0 =
  /// unchanged); an ERROR response drops its tensors.
  /// `local` gives this rank's request for a tensor, or nullptr when it has
  /// none (it joined): such a tensor is not a hit here.
  template <class LocalRequest>
  void apply(const v1::ResponseList& list, LocalRequest local) {
    for (const auto& name : list.uncached_names())
      erase(name);
    for (const auto& resp : list.responses()) {
      for (int i = 0; i < resp.tensor_names_size(); ++i) {
        const auto& name = resp.tensor_names(i);
        if (resp.op() == v1::OP_TYPE_ERROR)
          erase(name);
        else if (i < resp.cache_ids_size() && resp.cache_ids(i) != 0)
          assign(resp.cache_ids(i), name, local(name), lists_applied_ + 1,
                 first_dims_in(resp, i));
      }
    }
    ++lists_applied_;
  }

  /// Forgets every id (the coordinator emptied its cache).
  void clear() {
    by_name_.clear();
    by_id_.clear();
  }

  /// The id to send instead of `request`, or none when it must go in full.
  cache_ref hit(const v1::Request& request) const;

  /// Every rank's first dimension in the response that cached allgather
  /// `name` (set-rank order; empty for other tensors).
  const std::vector<int64_t>& first_dims(const std::string& name) const;

  /// The tensor that `id` names as of list `list` (the last that named
  /// it), if this view holds exactly that (null otherwise); valid until
  /// the view changes.
  const std::string* name_of(uint32_t id, uint64_t list) const;

  uint64_t lists_applied() const {
    return lists_applied_;
  }
  size_t size() const {
    return by_name_.size();
  }

private:
  struct slot {
    uint32_t id = 0;  // by_id_ holds the list that last named it
    bool has_request = false;
    v1::Request request;
    // An allgather's: every rank's first dimension (the fast lane builds
    // its response from them). Others' may change while this rank's
    // request does not.
    std::vector<int64_t> first_dims;
  };

  // Tensor i's per-rank first dimensions in an allgather response (fused:
  // each tensor's ranks in turn); empty for other ops.
  static std::vector<int64_t> first_dims_in(const v1::Response& resp, int i);
  void assign(uint32_t id, const std::string& name, const v1::Request* local, uint64_t list,
              std::vector<int64_t> first_dims);
  void erase(const std::string& name);

  std::unordered_map<std::string, slot> by_name_;
  // The id's tensor with the response list that last named it: the agreed
  // lists' lookups go by id, without hashing a name.
  struct id_holder {
    std::string name;
    uint64_t list = 0;
  };
  std::unordered_map<uint32_t, id_holder> by_id_;
  uint64_t lists_applied_ = 0;
};

} // namespace troupe::actors
