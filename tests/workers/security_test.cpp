// The pieces of a rank's security that need no peer: its listen address and
// its TLS credentials.

#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "workers/listen_address.hpp"
#include "workers/tls_credentials.hpp"

using namespace troupe::workers;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

X509* read_certificate(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f)
    return nullptr;
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  return cert;
}

// Whether `cert_path`'s certificate chains to the CA in `ca_path`.
bool verifies(const std::string& cert_path, const std::string& ca_path) {
  X509* cert = read_certificate(cert_path);
  X509* ca = read_certificate(ca_path);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  bool ok = cert && ca && X509_STORE_add_cert(store, ca) == 1 &&
            X509_STORE_CTX_init(ctx, store, cert, nullptr) == 1 &&
            X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(ca);
  X509_free(cert);
  return ok;
}

identity job(int size, int local_size, const std::string& host) {
  identity id;
  id.size = size;
  id.local_size = local_size;
  id.hostname = host;
  return id;
}

} // namespace

TEST(listen_address, loopback_for_a_job_on_one_host) {
  EXPECT_EQ(listen_address(job(4, 4, "somehost.example"), config{}), "127.0.0.1");
}

TEST(listen_address, the_address_of_the_host_name_across_hosts) {
  EXPECT_EQ(listen_address(job(2, 1, "localhost"), config{}), "127.0.0.1");
  EXPECT_EQ(listen_address(job(2, 1, "127.0.0.2"), config{}), "127.0.0.2");
  EXPECT_THROW(listen_address(job(2, 1, "no-such-host.invalid"), config{}), config_error);
}

TEST(listen_address, a_named_interface_wins) {
  config cfg;
  cfg.network_interface = "lo";
  EXPECT_EQ(listen_address(job(2, 1, "localhost"), cfg), "127.0.0.1");
  cfg.network_interface = "no-such-if0";
  try {
    listen_address(job(1, 1, "localhost"), cfg);
    FAIL() << "an unknown interface was accepted";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-if0"), std::string::npos) << e.what();
  }
}

TEST(tls_credentials, derived_alike_from_one_secret_and_apart_from_another) {
  auto a = tls_credentials::from_secret("a-job-secret-of-some-length");
  auto b = tls_credentials::from_secret("a-job-secret-of-some-length");
  auto other = tls_credentials::from_secret("another-job-secret-entirely");
  EXPECT_EQ(slurp(a.certificate()), slurp(b.certificate()));
  EXPECT_EQ(slurp(a.cafile()), slurp(b.cafile()));
  EXPECT_NE(slurp(a.key()).find("PRIVATE KEY"), std::string::npos);
  EXPECT_TRUE(verifies(a.certificate(), b.cafile()));
  EXPECT_FALSE(verifies(other.certificate(), a.cafile()));
  EXPECT_FALSE(verifies(a.certificate(), other.cafile()));
}

TEST(tls_credentials, user_files_are_checked_up_front) {
  auto derived = tls_credentials::from_secret("a-job-secret-of-some-length");
  auto other = tls_credentials::from_secret("another-job-secret-entirely");
  EXPECT_NO_THROW(
    tls_credentials::from_files(derived.certificate(), derived.key(), derived.cafile()));
  try {
    tls_credentials::from_files(derived.certificate(), other.key(), derived.cafile());
    FAIL() << "a key of another certificate was accepted";
  } catch (const tls_error& e) {
    EXPECT_NE(std::string(e.what()).find("mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("TROUPE_TLS_KEY"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tls_credentials::from_files("/nonexistent.pem", derived.key(), derived.cafile()),
               tls_error);
}
