#include "elastic/job_secret.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/mman.h>
#include <unistd.h>

namespace troupe::elastic {

namespace {

// A secret is a short text; anything longer behind the descriptor is not one.
constexpr size_t max_secret_size = 4096;

std::runtime_error fd_error(const std::string& fd_text, const std::string& why) {
  return std::runtime_error(std::string(secret_fd_variable) + "='" + fd_text + "': " + why);
}

} // namespace

std::string random_secret() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1)
    throw std::runtime_error("cannot draw a random job secret");
  auto hex = to_hex({reinterpret_cast<const char*>(raw), sizeof raw});
  OPENSSL_cleanse(raw, sizeof raw);
  return hex;
}

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &size))
    throw std::runtime_error("HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(out), size);
}

std::string derive_key(std::string_view secret, std::string_view purpose) {
  return hmac_sha256(secret, std::string("troupe v1 ") + std::string(purpose));
}

bool equal_digests(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

int secret_descriptor(const std::string& secret) {
  // No MFD_CLOEXEC: the workers inherit it. Sealed, so a worker cannot
  // change what its siblings read.
  int fd = ::memfd_create("troupe-secret", MFD_ALLOW_SEALING);
  if (fd < 0)
    throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  if (::write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size()) ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("cannot store the job secret: ") + std::strerror(err));
  }
  return fd;
}

namespace {

// A worker started over ssh reads its secret from a pipe (ssh's stdin):
// read to EOF, then put a sealed copy in its place, so that a later init()
// can pread it like troupe-run's own descriptor.
ssize_t read_stream(int fd, std::string& buffer) {
  size_t got = 0;
  while (got < buffer.size()) {
    const auto n = ::read(fd, buffer.data() + got, buffer.size() - got);
    if (n == 0)
      break;
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    got += static_cast<size_t>(n);
  }
  if (got < min_secret_size || got > max_secret_size)
    return static_cast<ssize_t>(got);
  const int copy = secret_descriptor(buffer.substr(0, got));
  const int moved = ::dup2(copy, fd);
  const int err = errno;
  ::close(copy);
  errno = err;
  return moved < 0 ? -1 : static_cast<ssize_t>(got);
}

} // namespace

std::optional<std::string> read_secret_descriptor(const std::string& fd_text) {
  if (fd_text.empty())
    return std::nullopt;
  int fd = -1;
  try {
    size_t used = 0;
    fd = std::stoi(fd_text, &used);
    if (used != fd_text.size() || fd < 0)
      fd = -1;
  } catch (const std::exception&) {
    fd = -1;
  }
  if (fd < 0)
    throw fd_error(fd_text, "not a file descriptor number");
  // pread from offset 0: a later init() in the same process reads it again.
  std::string secret(max_secret_size + 1, '\0');
  auto n = ::pread(fd, secret.data(), secret.size(), 0);
  if (n < 0 && errno == ESPIPE)
    n = read_stream(fd, secret);
  if (n < 0)
    throw fd_error(fd_text, std::strerror(errno) +
                              std::string(" (troupe-run hands it to the ranks it starts)"));
  if (static_cast<size_t>(n) < min_secret_size || static_cast<size_t>(n) > max_secret_size)
    throw fd_error(fd_text, "holds " + std::to_string(n) + " bytes, not a job secret");
  secret.resize(static_cast<size_t>(n));
  return secret;
}

} // namespace troupe::elastic
