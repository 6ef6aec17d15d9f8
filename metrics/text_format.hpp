#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/counter.hpp"
#include "metrics/gauge.hpp"
#include "metrics/histogram.hpp"

// Prometheus text exposition format 0.0.4: the building blocks the
// families use to write themselves.
namespace troupe::metrics::text {

/// The Content-Type of a /metrics answer in this format.
inline constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

using label_names = std::vector<std::string>;
using label_values = std::vector<std::string>;

/// HELP text: backslash and newline are escaped.
void append_help_escaped(std::string& out, std::string_view text);

/// Label value: backslash, double quote and newline are escaped.
void append_label_value_escaped(std::string& out, std::string_view text);

/// Go-style float: shortest round-trip digits, NaN, +Inf, -Inf.
void append_value(std::string& out, double v);

/// "# HELP name help\n# TYPE name type\n".
void append_header(std::string& out, std::string_view name, std::string_view help,
                   std::string_view type);

/// Sample lines of one child of a family.
void append_samples(std::string& out, const std::string& name, const label_names& names,
                    const label_values& values, const counter& c);
void append_samples(std::string& out, const std::string& name, const label_names& names,
                    const label_values& values, const gauge& g);
void append_samples(std::string& out, const std::string& name, const label_names& names,
                    const label_values& values, const histogram& h);

} // namespace troupe::metrics::text
