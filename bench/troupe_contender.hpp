#pragma once

#include <memory>
#include <string>

#include "bench/contender.hpp"

namespace troupe::bench {

/// Troupe's C++ API on an initialized runtime; `backend` only names it.
std::unique_ptr<contender> make_troupe_contender(const std::string& backend);

} // namespace troupe::bench
