#include "tls_files.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera::frontend {
namespace {

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

StatusOr<std::string> ReadFile(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

BioPtr MemoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free);
}

std::vector<X509Ptr> Certificates(const std::string& pem) {
  std::vector<X509Ptr> certificates;
  BioPtr bio = MemoryBio(pem);
  while (X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certificates.emplace_back(certificate, &X509_free);
  }
  ERR_clear_error();  // the read that ends the loop leaves "no start line" behind
  return certificates;
}

// OpenSSL's default asks for a passphrase on the terminal; a server must not wait on one.
int NoPassphrase(char*, int, int, void*) { return -1; }

std::string TimeText(const ASN1_TIME* time) {
  BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
  ASN1_TIME_print(bio.get(), time);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

void WarnOutsideValidity(X509* certificate, const std::string& key, const std::string& path) {
  if (X509_cmp_current_time(X509_get0_notAfter(certificate)) < 0) {
    spdlog::warn("{}: the certificate in {} expired on {}; clients will refuse it", key, path,
                 TimeText(X509_get0_notAfter(certificate)));
  } else if (X509_cmp_current_time(X509_get0_notBefore(certificate)) > 0) {
    spdlog::warn("{}: the certificate in {} is not valid before {}; clients will refuse it", key,
                 path, TimeText(X509_get0_notBefore(certificate)));
  }
}

}  // namespace

StatusOr<TlsPem> ReadTlsFiles(const TlsFiles& files, std::string_view what) {
  const std::string cert_key = std::string(what) + ".cert";
  const std::string key_key = std::string(what) + ".key";
  const std::string ca_key = std::string(what) + ".client_ca";
  TlsPem pem;
  TESSERA_ASSIGN_OR_RETURN(pem.cert_chain, ReadFile(files.cert, cert_key));
  std::vector<X509Ptr> chain = Certificates(pem.cert_chain);
  if (chain.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        cert_key, ": ", files.cert, " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
  }
  WarnOutsideValidity(chain.front().get(), cert_key, files.cert);

  TESSERA_ASSIGN_OR_RETURN(pem.key, ReadFile(files.key, key_key));
  BioPtr key_bio = MemoryBio(pem.key);
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, &NoPassphrase, nullptr),
             &EVP_PKEY_free);
  ERR_clear_error();
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_key, ": ", files.key,
                     " holds no PEM private key (a passphrase-protected key is not supported)"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(key_key, ": ", files.key,
                                                   " is not the key of the first certificate in ",
                                                   files.cert, " (", cert_key, ")"));
  }

  if (!files.client_ca.empty()) {
    TESSERA_ASSIGN_OR_RETURN(pem.client_ca, ReadFile(files.client_ca, ca_key));
    if (Certificates(pem.client_ca).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ca_key, ": ", files.client_ca,
                       " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
  }
  return pem;
}

std::string TlsFilesSnapshot(const TlsFiles& files) {
  std::string snapshot;
  for (const std::string* path : {&files.cert, &files.key, &files.client_ca}) {
    StatusOr<std::string> bytes =
        path->empty() ? StatusOr<std::string>(std::string()) : ReadFile(*path, "");
    // The sizes keep "ab" + "c" apart from "a" + "bc"; an unreadable file's size is -1.
    const int64_t size = bytes.ok() ? static_cast<int64_t>(bytes->size()) : -1;
    absl::StrAppend(&snapshot, size, ":", bytes.value_or(""), ";");
  }
  return snapshot;
}

}  // namespace tessera::frontend
