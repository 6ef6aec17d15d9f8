#pragma once

#include <stdexcept>
#include <string>

#include "elastic/socket_util.hpp"

namespace troupe::workers {

/// The credentials could not be made or read; the message says which.
class tls_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// PEM files for CAF's OpenSSL module (openssl.certificate / .key /
/// .cafile): paths to in-memory files that live as long as this object and
/// vanish with the process, so no key is ever left on disk.
class tls_credentials {
public:
  /// The job's credentials derived from its secret: a CA key and
  /// self-signed CA certificate, and a rank key pair with a certificate
  /// signed by that CA (Ed25519, deterministic, so every holder of the
  /// secret derives the same ones and nobody else can make a certificate
  /// the job trusts).
  static tls_credentials from_secret(const std::string& secret);

  /// User-supplied PEM files, checked here: CAF would only find a bad file
  /// at the first connection, in its I/O thread.
  static tls_credentials from_files(const std::string& certificate, const std::string& key,
                                    const std::string& cafile);

  const std::string& certificate() const {
    return certificate_;
  }
  const std::string& key() const {
    return key_;
  }
  const std::string& cafile() const {
    return cafile_;
  }

private:
  std::string certificate_;
  std::string key_;
  std::string cafile_;
  elastic::net::unique_fd certificate_fd_;
  elastic::net::unique_fd key_fd_;
  elastic::net::unique_fd cafile_fd_;
};

} // namespace troupe::workers
