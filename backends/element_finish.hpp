#pragma once

#include <cstddef>
#include <functional>

namespace troupe::backends {

/// What an allreduce does to each element of its result once it is reduced
/// (an average's division, a postscale), on `count` elements at `data`;
/// empty when nothing. Element-wise, so a communicator that reduces a
/// vector in shares may apply it to each share where it is reduced, while
/// the share is in cache, instead of every rank passing over all of it
/// after.
using element_finish = std::function<void(void* data, size_t count)>;

} // namespace troupe::backends
