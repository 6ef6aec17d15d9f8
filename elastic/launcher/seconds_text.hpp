#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace troupe::elastic::launcher {

/// A duration as troupe-run's messages give seconds: "0.25", "5", "600".
inline std::string seconds_text(std::chrono::duration<double> d) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", d.count());
  return text;
}

} // namespace troupe::elastic::launcher
