#include "actors/cache_view.hpp"

#include "proto/request_parameters.hpp"

namespace troupe::actors {

cache_ref cache_view::hit(const v1::Request& request) const {
  auto it = by_name_.find(request.tensor_name());
  if (it == by_name_.end() || !it->second.has_request ||
      !same_parameters(it->second.request, request))
    return {};
  return {it->second.id, by_id_.at(it->second.id).list};
}

const std::string* cache_view::name_of(uint32_t id, uint64_t list) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() || it->second.list != list ? nullptr : &it->second.name;
}

const std::vector<int64_t>& cache_view::first_dims(const std::string& name) const {
  static const std::vector<int64_t> none;
  auto it = by_name_.find(name);
  return it == by_name_.end() ? none : it->second.first_dims;
}

std::vector<int64_t> cache_view::first_dims_in(const v1::Response& resp, int i) {
  if (resp.op() != v1::OP_TYPE_ALLGATHER || resp.tensor_names_size() == 0)
    return {};
  const int per_tensor = resp.tensor_sizes_size() / resp.tensor_names_size();
  const auto from = resp.tensor_sizes().begin() + i * per_tensor;
  return {from, from + per_tensor};
}

void cache_view::assign(uint32_t id, const std::string& name, const v1::Request* local,
                        uint64_t list, std::vector<int64_t> first_dims) {
  // The id moved to another tensor: the coordinator evicted the old one.
  if (auto old = by_id_.find(id); old != by_id_.end() && old->second.name != name)
    by_name_.erase(old->second.name);
  auto& s = by_name_[name];
  if (s.id != 0 && s.id != id)
    by_id_.erase(s.id);
  // Steady state re-announces the same id and request every step: no copy.
  const bool unchanged = s.id == id && s.has_request && local &&
                         same_parameters(s.request, *local);
  s.id = id;
  s.first_dims = std::move(first_dims);
  if (!unchanged) {
    s.has_request = local != nullptr;
    if (local)
      s.request = *local;
  }
  auto& holder = by_id_[id];
  if (holder.name != name)
    holder.name = name;
  holder.list = list;
}

void cache_view::erase(const std::string& name) {
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    return;
  by_id_.erase(it->second.id);
  by_name_.erase(it);
}

} // namespace troupe::actors
