#pragma once

#include <optional>
#include <string>
#include <string_view>

// The per-job secret: the root of trust of a job. The store's request MACs
// and the control plane's TLS credentials are derived from it, so whoever
// holds it can join the job, and nobody else can.
namespace troupe::elastic {

/// Shortest secret accepted from a user (TROUPE_SECRET_KEY), in bytes.
constexpr size_t min_secret_size = 16;

/// Environment variable that tells a worker which inherited descriptor
/// holds troupe-run's secret.
constexpr const char* secret_fd_variable = "TROUPE_SECRET_FD";

/// 32 random bytes from the kernel as 64 hex digits; throws on failure.
std::string random_secret();
/// `bytes` as lower-case hex digits, two per byte.
std::string to_hex(std::string_view bytes);

/// HMAC-SHA256 of `message` under `key`: 32 raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view message);

/// A key for one purpose ("store", "tls-ca", ...): distinct purposes never
/// share key material.
std::string derive_key(std::string_view secret, std::string_view purpose);

/// Constant-time comparison of two byte strings.
bool equal_digests(std::string_view a, std::string_view b);

/// A sealed in-memory file holding `secret`, inheritable by children;
/// returns its descriptor. Throws std::runtime_error on failure.
int secret_descriptor(const std::string& secret);

/// The secret behind the descriptor named by `fd_text` (the value of
/// TROUPE_SECRET_FD), or nothing when `fd_text` is empty. A pipe (a worker
/// started over ssh reads ssh's stdin) is read to EOF and replaced by a
/// sealed in-memory copy, so it can be read again. Throws
/// std::runtime_error naming the variable when it cannot be read.
std::optional<std::string> read_secret_descriptor(const std::string& fd_text);

} // namespace troupe::elastic
