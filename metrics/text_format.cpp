#include "metrics/text_format.hpp"

#include <charconv>
#include <cmath>

namespace troupe::metrics::text {

namespace {

// `{a="x",b="y"}`, with `le` last for histogram buckets; nothing when
// there are no labels at all.
void append_labels(std::string& out, const label_names& names, const label_values& values,
                   const std::string* le = nullptr) {
  if (names.empty() && !le)
    return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0)
      out += ',';
    out += names[i];
    out += "=\"";
    append_label_value_escaped(out, values[i]);
    out += '"';
  }
  if (le) {
    out += names.empty() ? "le=\"" : ",le=\"";
    out += *le;
    out += '"';
  }
  out += '}';
}

void append_line(std::string& out, const std::string& name, std::string_view suffix,
                 const label_names& names, const label_values& values, std::string_view value,
                 const std::string* le = nullptr) {
  out += name;
  out += suffix;
  append_labels(out, names, values, le);
  out += ' ';
  out += value;
  out += '\n';
}

// HELP escapes backslash and newline; label values also double quotes.
void append_escaped(std::string& out, std::string_view text, bool quotes) {
  for (char ch : text) {
    if (ch == '\\')
      out += "\\\\";
    else if (ch == '\n')
      out += "\\n";
    else if (quotes && ch == '"')
      out += "\\\"";
    else
      out += ch;
  }
}

} // namespace

void append_help_escaped(std::string& out, std::string_view text) {
  append_escaped(out, text, false);
}

void append_label_value_escaped(std::string& out, std::string_view text) {
  append_escaped(out, text, true);
}

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

void append_header(std::string& out, std::string_view name, std::string_view help,
                   std::string_view type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  append_help_escaped(out, help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void append_samples(std::string& out, const std::string& name, const label_names& names,
                    const label_values& values, const counter& c) {
  append_line(out, name, "", names, values, std::to_string(c.value()));
}

void append_samples(std::string& out, const std::string& name, const label_names& names,
                    const label_values& values, const gauge& g) {
  append_line(out, name, "", names, values, std::to_string(g.value()));
}

void append_samples(std::string& out, const std::string& name, const label_names& names,
                    const label_values& values, const histogram& h) {
  const auto s = h.read();
  std::string le;
  for (size_t i = 0; i < s.bounds.size(); ++i) {
    le.clear();
    append_value(le, s.bounds[i]);
    append_line(out, name, "_bucket", names, values, std::to_string(s.cumulative[i]), &le);
  }
  le = "+Inf";
  append_line(out, name, "_bucket", names, values, std::to_string(s.cumulative.back()), &le);
  std::string sum;
  append_value(sum, s.sum);
  append_line(out, name, "_sum", names, values, sum);
  append_line(out, name, "_count", names, values, std::to_string(s.count));
}

} // namespace troupe::metrics::text
