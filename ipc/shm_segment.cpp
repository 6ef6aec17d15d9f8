#include "ipc/shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <stdexcept>

#include "ipc/process_alive.hpp"

namespace troupe::ipc {

namespace {

std::runtime_error failure(const std::string& what, const std::string& name) {
  return std::runtime_error("shared memory segment " + name + ": " + what + ": " +
                       std::strerror(errno));
}

// Maps `fd` (closed here either way) of `bytes` bytes.
void* map(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);
  errno = mmap_errno;
  if (p == MAP_FAILED)
    throw failure("mmap of " + std::to_string(bytes) + " bytes failed", name);
  return p;
}

} // namespace

shm_segment shm_segment::create(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    throw failure("shm_open(O_CREAT | O_EXCL) failed", name);
  // From here the name is ours: a failure removes it again.
  // Allocated now, not at first touch: a /dev/shm too small for it (a
  // container's 64 MiB) fails here with a message instead of a SIGBUS later.
  if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    errno = rc;
    const auto error = failure("allocating " + std::to_string(bytes) +
                                 " bytes failed (a full /dev/shm?)",
                               name);
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw error;
  }
  try {
    return shm_segment(name, map(fd, bytes, name), bytes);
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
}

shm_segment shm_segment::open(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    throw failure("shm_open failed", name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    const auto have = std::to_string(st.st_size);
    ::close(fd);
    throw std::runtime_error("shared memory segment " + name + " holds " + have +
                        " bytes, expected " + std::to_string(bytes) +
                        " (not the segment its creator made)");
  }
  return shm_segment(name, map(fd, bytes, name), bytes);
}

shm_segment shm_segment::open(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    throw failure("shm_open failed", name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw std::runtime_error("shared memory segment " + name + " is empty");
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  return shm_segment(name, map(fd, bytes, name), bytes);
}

shm_segment::shm_segment(std::string name, void* data, size_t bytes)
    : name_(std::move(name)), data_(data), bytes_(bytes), owns_name_(true) {
}

shm_segment::shm_segment(shm_segment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(other.data_),
      bytes_(other.bytes_),
      owns_name_(other.owns_name_) {
  other.data_ = nullptr;
  other.owns_name_ = false;
}

shm_segment::~shm_segment() {
  unlink();
  if (data_)
    ::munmap(data_, bytes_);
}

void shm_segment::unlink() {
  if (owns_name_)
    ::shm_unlink(name_.c_str());
  owns_name_ = false;
}

std::string fresh_segment_name(const std::string& kind) {
  std::random_device random;
  const uint64_t bits = uint64_t{random()} << 32 | random();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  return "/troupe-" + kind + std::to_string(::getpid()) + "-" +
         std::to_string(pid_namespace_inode()) + "-" + hex;
}

uint64_t pid_namespace_inode() {
  static const uint64_t inode = [] {
    struct stat ns {};
    return ::stat("/proc/self/ns/pid", &ns) == 0 ? static_cast<uint64_t>(ns.st_ino)
                                                  : uint64_t{0};
  }();
  return inode;
}

bool segment_creator::in_this_pid_namespace() const {
  return pid_namespace == pid_namespace_inode();
}

std::optional<segment_creator> creator_of(const std::string& entry) {
  // What fresh_segment_name writes, without the slash.
  static const std::regex name{"troupe-(?:[a-z]+-)?([0-9]{1,10})-([0-9]{1,20})-[0-9a-f]{16}"};
  std::smatch m;
  if (!std::regex_match(entry, m, name))
    return std::nullopt;
  try {
    return segment_creator{static_cast<pid_t>(std::stoll(m[1])), std::stoull(m[2])};
  } catch (const std::out_of_range&) {  // 20 digits past 2^64
    return std::nullopt;
  }
}

std::vector<std::string> segment_entries() {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> dir{::opendir("/dev/shm"), ::closedir};
  if (!dir)
    return out;
  while (const dirent* e = ::readdir(dir.get()))
    if (creator_of(e->d_name))
      out.emplace_back(e->d_name);
  return out;
}

std::vector<std::string> remove_segments_of(pid_t pid) {
  std::vector<std::string> removed;
  for (const auto& entry : segment_entries())
    if (const auto c = *creator_of(entry);
        c.pid == pid && c.in_this_pid_namespace() && ::shm_unlink(("/" + entry).c_str()) == 0)
      removed.push_back("/" + entry);
  return removed;
}

std::vector<orphaned_segment> remove_orphaned_segments(const std::vector<std::string>& before) {
  const std::set<std::string> known(before.begin(), before.end());
  std::vector<orphaned_segment> removed;
  for (const auto& entry : segment_entries()) {
    // Another namespace's pid may name a live process of this one.
    const auto creator = *creator_of(entry);
    if (!known.count(entry) && creator.in_this_pid_namespace() &&
        !process_alive(creator.pid) && ::shm_unlink(("/" + entry).c_str()) == 0)
      removed.push_back({"/" + entry, creator.pid});
  }
  return removed;
}

} // namespace troupe::ipc
