#include "elastic/launcher/output_files.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace troupe::elastic::launcher {

namespace {

// One rank's file of one stream, written line by line.
struct rank_file {
  std::mutex mtx;
  std::ofstream out;
};

void create_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec)
    throw std::runtime_error("--output-filename: cannot create " + folder.string() + ": " +
                             ec.message());
}

// `out` with each line prefixed by the local time, as Python's
// time.asctime() writes it (horovodrun's format).
line_forwarder::sink timestamped(line_forwarder::sink out) {
  return [out = std::move(out)](std::string_view line) {
    const auto now = std::time(nullptr);
    std::tm local{};
    ::localtime_r(&now, &local);
    char stamp[64];
    const auto n = std::strftime(stamp, sizeof stamp, "%a %b %e %H:%M:%S %Y", &local);
    std::string stamped(stamp, n);
    stamped += line;
    out(stamped);
  };
}

} // namespace

output_files::output_files(std::string dir, int size, bool timestamps)
    : dir_(std::move(dir)), width_(static_cast<int>(std::to_string(std::max(size - 1, 0)).size())),
      timestamps_(timestamps) {
  if (!dir_.empty())
    create_folder(dir_);
}

line_forwarder::sink output_files::tee(int rank, const std::string& stream,
                                       line_forwarder::sink console) const {
  auto both = to_file(rank, stream, std::move(console));
  return timestamps_ ? timestamped(std::move(both)) : both;
}

line_forwarder::sink output_files::to_file(int rank, const std::string& stream,
                                           line_forwarder::sink console) const {
  if (dir_.empty())
    return console;
  auto name = std::to_string(rank);
  name.insert(0, static_cast<size_t>(std::max(0, width_ - static_cast<int>(name.size()))), '0');
  const auto folder = std::filesystem::path(dir_) / ("rank." + name);
  create_folder(folder);
  auto file = std::make_shared<rank_file>();
  file->out.open(folder / stream, std::ios::out | std::ios::trunc);
  if (!file->out)
    throw std::runtime_error("--output-filename: cannot write " + (folder / stream).string());
  return [file, console = std::move(console)](std::string_view line) {
    console(line);
    std::lock_guard<std::mutex> guard{file->mtx};
    file->out.write(line.data(), static_cast<std::streamsize>(line.size()));
    file->out.flush();
  };
}

} // namespace troupe::elastic::launcher
