#include "elastic/launcher/line_forwarder.hpp"

namespace troupe::elastic::launcher {

namespace {

// A "line" this long without a newline (a progress bar, binary output) is
// cut rather than buffered without bound.
constexpr size_t max_line = 1 << 20;

} // namespace

line_forwarder::line_forwarder(int rank, std::string_view stream, sink out)
  : prefix_(rank == mpirun_rank ? ""
                                : "[" + std::to_string(rank) + "]<" + std::string(stream) + ">:"),
    out_(std::move(out)) {
  // nop
}

void line_forwarder::feed(std::string_view data) {
  while (!data.empty()) {
    auto newline = data.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(data);
      if (pending_.size() >= max_line)
        finish();
      return;
    }
    if (pending_.empty()) {
      emit(data.substr(0, newline));
    } else {
      pending_.append(data.substr(0, newline));
      emit(pending_);
      pending_.clear();
    }
    data.remove_prefix(newline + 1);
  }
}

void line_forwarder::finish() {
  if (pending_.empty())
    return;
  emit(pending_);
  pending_.clear();
}

void line_forwarder::emit(std::string_view line) {
  std::string tagged;
  tagged.reserve(prefix_.size() + line.size() + 1);
  tagged += prefix_;
  tagged += line;
  tagged += '\n';
  out_(tagged);
}

} // namespace troupe::elastic::launcher
