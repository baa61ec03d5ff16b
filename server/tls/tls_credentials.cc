#include "server/tls/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace manypy {
namespace {

template <typename T, void (*Free)(T*)>
struct OpenSslDeleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, OpenSslDeleter<BIO, BIO_free_all>>;
using Certificate = std::unique_ptr<X509, OpenSslDeleter<X509, X509_free>>;
using PrivateKey = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY, EVP_PKEY_free>>;

StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return InvalidArgument("--" + flag + ": " + path + " does not exist");
  }
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument("--" + flag + ": " + path + " is a directory, not a PEM file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("--" + flag + ": cannot read " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return InvalidArgument("--" + flag + ": " + path + " is empty");
  return text.str();
}

Bio MemoryBio(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

// Never prompts on the terminal for a passphrase: an encrypted key is refused.
int NoPassphrase(char*, int, int, void*) { return 0; }

// The first certificate of `pem` (the server's own in a chain), or an error.
StatusOr<Certificate> FirstCertificate(const std::string& flag, const std::string& path,
                                       const std::string& pem) {
  Bio bio = MemoryBio(pem);
  Certificate cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (cert == nullptr) {
    return InvalidArgument("--" + flag + ": " + path + " holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    return InvalidArgument("--" + flag + ": the certificate in " + path + " has expired");
  }
  return cert;
}

}  // namespace

StatusOr<TlsCredentials> TlsCredentials::Load(const std::string& cert_file, const std::string& key_file,
                                              const std::string& client_ca_file) {
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgument(std::string("--tls-cert and --tls-key go together: ") +
                           (cert_file.empty() ? "--tls-cert" : "--tls-key") + " is missing");
  }
  if (cert_file.empty()) {  // callers load only when some TLS flag is set: here only the CA
    return InvalidArgument("--tls-client-ca needs --tls-cert and --tls-key (the server's own certificate)");
  }
  TlsCredentials tls;
  auto chain = ReadPemFile("tls-cert", cert_file);
  if (!chain.ok()) return chain.status();
  tls.certificate_chain = std::move(*chain);
  auto key_pem = ReadPemFile("tls-key", key_file);
  if (!key_pem.ok()) return key_pem.status();
  tls.private_key = std::move(*key_pem);
  auto cert = FirstCertificate("tls-cert", cert_file, tls.certificate_chain);
  if (!cert.ok()) return cert.status();

  Bio key_bio = MemoryBio(tls.private_key);
  PrivateKey key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return InvalidArgument("--tls-key: " + key_file +
                           " holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)");
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("--tls-key: the private key in " + key_file +
                           " does not match the certificate in " + cert_file);
  }
  if (!client_ca_file.empty()) {
    auto ca = ReadPemFile("tls-client-ca", client_ca_file);
    if (!ca.ok()) return ca.status();
    tls.client_ca = std::move(*ca);
    MANYPY_RETURN_IF_ERROR(FirstCertificate("tls-client-ca", client_ca_file, tls.client_ca).status());
  }
  return tls;
}

}  // namespace manypy
