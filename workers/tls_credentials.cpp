#include "workers/tls_credentials.hpp"

#include <cerrno>
#include <cstring>
#include <memory>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elastic/job_secret.hpp"

namespace troupe::workers {

namespace {

template <class T, void (*Free)(T*)>
struct freer {
  void operator()(T* p) const {
    Free(p);
  }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, freer<EVP_PKEY, EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, freer<X509, X509_free>>;
using bio_ptr = std::unique_ptr<BIO, freer<BIO, BIO_free_all>>;
using ctx_ptr = std::unique_ptr<SSL_CTX, freer<SSL_CTX, SSL_CTX_free>>;

tls_error failure(const std::string& what) {
  std::string why;
  if (auto code = ERR_get_error(); code != 0) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    why = std::string(": ") + text;
  }
  ERR_clear_error();
  return tls_error("control-plane TLS: " + what + why);
}

pkey_ptr ed25519_key(const std::string& secret, const char* purpose) {
  const auto seed = elastic::derive_key(secret, purpose);
  pkey_ptr key{EVP_PKEY_new_raw_private_key(
    EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()), 32)};
  if (!key)
    throw failure("cannot make an Ed25519 key");
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext || X509_add_ext(cert, ext, -1) != 1) {
    X509_EXTENSION_free(ext);
    throw failure(std::string("cannot add extension ") + value);
  }
  X509_EXTENSION_free(ext);
}

// Fixed serials and validity: every rank derives byte-identical
// certificates, and the job's secret, not a date, bounds their use.
x509_ptr make_certificate(EVP_PKEY* key, const char* common_name, long serial, X509* issuer,
                     EVP_PKEY* issuer_key) {
  x509_ptr cert{X509_new()};
  if (!cert || X509_set_version(cert.get(), 2) != 1 ||
      ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial) != 1 ||
      ASN1_TIME_set_string(X509_getm_notBefore(cert.get()), "20200101000000Z") != 1 ||
      ASN1_TIME_set_string(X509_getm_notAfter(cert.get()), "99991231235959Z") != 1 ||
      X509_set_pubkey(cert.get(), key) != 1 ||
      X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(common_name), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer ? issuer : cert.get())) != 1)
    throw failure(std::string("cannot fill certificate ") + common_name);
  X509* signer = issuer ? issuer : cert.get();
  if (issuer) {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
    add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  } else {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign");
  }
  // Ed25519 signs the whole message: no separate digest.
  if (X509_sign(cert.get(), issuer_key, nullptr) <= 0)
    throw failure(std::string("cannot sign certificate ") + common_name);
  return cert;
}

template <class Write>
std::string pem(Write write) {
  bio_ptr bio{BIO_new(BIO_s_mem())};
  if (!bio || write(bio.get()) != 1)
    throw failure("cannot encode PEM");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// An in-memory file readable through /proc/self/fd by path, as CAF (and
// OpenSSL's *_file loaders under it) want paths.
std::string memory_file(const std::string& name, const std::string& content,
                        elastic::net::unique_fd& fd) {
  fd.reset(::memfd_create(name.c_str(), MFD_CLOEXEC));
  if (!fd || ::write(fd.get(), content.data(), content.size()) !=
               static_cast<ssize_t>(content.size()))
    throw tls_error("control-plane TLS: cannot hold " + name + " in memory: " +
                    std::strerror(errno));
  return "/proc/self/fd/" + std::to_string(fd.get());
}

} // namespace

tls_credentials tls_credentials::from_secret(const std::string& secret) {
  auto ca_key = ed25519_key(secret, "control-plane ca");
  auto rank_key = ed25519_key(secret, "control-plane rank");
  auto ca = make_certificate(ca_key.get(), "troupe job CA", 1, nullptr, ca_key.get());
  auto rank = make_certificate(rank_key.get(), "troupe rank", 2, ca.get(), ca_key.get());
  tls_credentials out;
  out.certificate_ = memory_file(
    "troupe-rank.pem", pem([&](BIO* b) { return PEM_write_bio_X509(b, rank.get()); }),
    out.certificate_fd_);
  out.key_ = memory_file("troupe-rank-key.pem", pem([&](BIO* b) {
                           return PEM_write_bio_PrivateKey(b, rank_key.get(), nullptr, nullptr,
                                                           0, nullptr, nullptr);
                         }),
                         out.key_fd_);
  out.cafile_ = memory_file(
    "troupe-ca.pem", pem([&](BIO* b) { return PEM_write_bio_X509(b, ca.get()); }),
    out.cafile_fd_);
  return out;
}

tls_credentials tls_credentials::from_files(const std::string& certificate,
                                            const std::string& key,
                                            const std::string& cafile) {
  // The same loaders CAF calls for each connection.
  ctx_ptr ctx{SSL_CTX_new(TLS_method())};
  if (!ctx)
    throw failure("cannot create a context");
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), certificate.c_str()) != 1)
    throw failure("cannot load the certificate TROUPE_TLS_CERTIFICATE='" + certificate + "'");
  // Also fails when the key is not the certificate's.
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1)
    throw failure("cannot load the private key TROUPE_TLS_KEY='" + key +
                  "' of TROUPE_TLS_CERTIFICATE='" + certificate + "'");
  if (SSL_CTX_load_verify_locations(ctx.get(), cafile.c_str(), nullptr) != 1)
    throw failure("cannot load the CA certificates TROUPE_TLS_CAFILE='" + cafile + "'");
  tls_credentials out;
  out.certificate_ = certificate;
  out.key_ = key;
  out.cafile_ = cafile;
  return out;
}

} // namespace troupe::workers
