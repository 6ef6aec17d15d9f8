#include "actors/timeline_writer.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

namespace troupe::actors {

namespace {

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;  // control characters have no place in a tensor name
    out += c;
  }
  return out;
}

} // namespace

timeline_writer::timeline_writer(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot write timeline " + path + ": " + std::strerror(errno));
  const std::string start = "[\n]";
  if (::pwrite(fd_, start.data(), start.size(), 0) != static_cast<ssize_t>(start.size()))
    throw std::runtime_error("cannot write timeline " + path + ": " + std::strerror(errno));
  end_ = 1;
}

timeline_writer::~timeline_writer() {
  if (fd_ >= 0)
    ::close(fd_);
}

void timeline_writer::append(const std::string& json_object) {
  const std::string text = (first_ ? "\n" : ",\n") + json_object + "\n]";
  first_ = false;
  // One pwrite: the old "\n]" is replaced by the event and a new "\n]".
  if (::pwrite(fd_, text.data(), text.size(), end_) == static_cast<ssize_t>(text.size()))
    end_ += static_cast<int64_t>(text.size()) - 2;
}

int timeline_writer::row(const std::string& tensor) {
  auto [it, inserted] = rows_.try_emplace(tensor, static_cast<int>(rows_.size()) + 1);
  if (inserted)
    append("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + std::to_string(it->second) +
           ", \"args\": {\"name\": \"" + escaped(tensor) + "\"}}");
  return it->second;
}

void timeline_writer::event(const std::string& tensor, char phase, const std::string& activity,
                            int64_t ts_us) {
  const int pid = row(tensor);
  append("{\"name\": \"" + escaped(activity) + "\", \"ph\": \"" + std::string(1, phase) +
         "\", \"ts\": " + std::to_string(ts_us) + ", \"pid\": " + std::to_string(pid) +
         ", \"tid\": 1}");
}

void timeline_writer::mark(const std::string& name, int64_t ts_us) {
  append("{\"name\": \"" + escaped(name) + "\", \"ph\": \"i\", \"s\": \"g\", \"ts\": " +
         std::to_string(ts_us) + ", \"pid\": 0, \"tid\": 1}");
}

} // namespace troupe::actors
