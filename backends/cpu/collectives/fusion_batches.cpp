#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

namespace {

// A tensor of at least 1/32 of a chunk (32 KiB of the default 1 MiB) runs
// on its own, where it lies, rather than copied into the fusion buffer and
// out again: past that size the two copies cost more than the extra library
// call. Under MPI here, 64 allreduced tensors of 32 KiB took 607 us one
// call each against 597 us packed in 1 MiB pieces, of 64 KiB 877 against
// 1,157 us, of 256 KiB 2,777 against 4,886 us; the ResNet-50 step went from
// 1.07 to 1.00 x raw MPI (docs/benchmarks.md).
constexpr size_t alone_fraction = 32;

// Calls batch() on consecutive runs of [first, last) of at most `chunk`
// bytes each (0: one run); tensors of no bytes too (a reducescatter still
// sizes their results).
void in_chunks(entry_iterator first, entry_iterator last, size_t chunk,
               const std::function<void(entry_iterator, entry_iterator, size_t)>& batch) {
  auto begin = first;
  size_t filled = 0;
  for (auto it = first; it != last; ++it) {
    const size_t size = (*it)->input.size_bytes();
    if (chunk != 0 && filled > 0 && filled + size > chunk) {
      batch(begin, it, filled);
      begin = it;
      filled = 0;
    }
    filled += size;
  }
  if (begin != last)
    batch(begin, last, filled);
}

} // namespace

void pack_inputs(entry_iterator first, entry_iterator last, char* buffer) {
  for (; first != last; ++first) {
    std::memcpy(buffer, (*first)->input.data, (*first)->input.size_bytes());
    buffer += (*first)->input.size_bytes();
  }
}

void run_in_batches(const std::vector<actors::tensor_entry_ptr>& entries, size_t chunk,
                    const std::function<void(actors::tensor_entry&)>& alone,
                    const std::function<void(entry_iterator, entry_iterator, size_t)>& batch) {
  const size_t alone_from = chunk / alone_fraction;
  const auto large = [&](const actors::tensor_entry_ptr& e) {
    return e->input.size_bytes() >= alone_from;
  };
  if (chunk == 0 || std::none_of(entries.begin(), entries.end(), large)) {
    in_chunks(entries.begin(), entries.end(), chunk, batch);
    return;
  }
  // Every rank cuts alike: the response fixes the tensors and their sizes.
  std::vector<actors::tensor_entry_ptr> small;
  for (const auto& e : entries) {
    if (large(e))
      alone(*e);
    else
      small.push_back(e);
  }
  in_chunks(small.begin(), small.end(), chunk, batch);
}

} // namespace troupe::backends
