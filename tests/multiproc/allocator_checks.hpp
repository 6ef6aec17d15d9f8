#pragma once

#include <vector>

#include "checks.hpp"

namespace troupe::test {

/// Allgather (single, fused, empty), alltoall with uneven splits and
/// reducescatter (single, grouped) writing into memory from an
/// output_allocator: each allocator is called exactly once with the
/// result's shape, the result is exact and the handle's own output stays
/// empty. (Allocator errors are among the error checks.)
std::vector<check> allocator_checks(int rank, int size);

} // namespace troupe::test
