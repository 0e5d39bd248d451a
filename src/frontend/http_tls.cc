#include "http_tls.h"

#include <gnutls/gnutls.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "tessera/common/thread_name.h"
#include "tls_files.h"

namespace tessera::frontend {
namespace {

constexpr char kWhat[] = "http.tls";

struct FreeCredentials {
  void operator()(gnutls_certificate_credentials_t credentials) const {
    gnutls_certificate_free_credentials(credentials);
  }
};
using Credentials = std::unique_ptr<gnutls_certificate_credentials_st, FreeCredentials>;

gnutls_datum_t Datum(const std::string& text) {
  // GnuTLS only reads it.
  return {reinterpret_cast<unsigned char*>(const_cast<char*>(text.data())),
          static_cast<unsigned>(text.size())};
}

// GnuTLS credentials from files ReadTlsFiles has checked with OpenSSL (GnuTLS may still refuse
// something OpenSSL took, a key type it lacks for one).
StatusOr<Credentials> MakeCredentials(const TlsPem& pem, const TlsFiles& files) {
  gnutls_certificate_credentials_t raw = nullptr;
  if (int rc = gnutls_certificate_allocate_credentials(&raw); rc < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat(kWhat, ": cannot allocate GnuTLS credentials: ", gnutls_strerror(rc)));
  }
  Credentials credentials(raw);
  gnutls_datum_t cert = Datum(pem.cert_chain);
  gnutls_datum_t key = Datum(pem.key);
  if (int rc = gnutls_certificate_set_x509_key_mem(raw, &cert, &key, GNUTLS_X509_FMT_PEM); rc < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kWhat, ".cert: GnuTLS cannot serve ", files.cert,
                                                   " with the key in ", files.key, ": ",
                                                   gnutls_strerror(rc)));
  }
  if (!pem.client_ca.empty()) {
    gnutls_datum_t ca = Datum(pem.client_ca);
    if (int rc = gnutls_certificate_set_x509_trust_mem(raw, &ca, GNUTLS_X509_FMT_PEM); rc <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWhat, ".client_ca: GnuTLS takes no CA certificate from ", files.client_ca,
                       rc < 0 ? absl::StrCat(": ", gnutls_strerror(rc)) : ""));
    }
  }
  return credentials;
}

class HttpTlsImpl final : public HttpTls {
 public:
  HttpTlsImpl(const TlsFiles& files, TlsPem start_pem, Credentials credentials,
              std::string snapshot)
      : files_(files), start_pem_(std::move(start_pem)), snapshot_(std::move(snapshot)) {
    current_ = credentials.get();
    made_.push_back(std::move(credentials));
    reloader_ = std::thread([this] { ReloadLoop(); });
  }

  ~HttpTlsImpl() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    reloader_.join();
  }

  std::vector<MHD_OptionItem> MhdOptions() override {
    return {{MHD_OPTION_HTTPS_MEM_KEY, 0, start_pem_.key.data()},
            {MHD_OPTION_HTTPS_MEM_CERT, 0, start_pem_.cert_chain.data()},
            {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&HttpTlsImpl::OnConnection),
             this}};
  }

  bool Prepared(MHD_Connection* connection) const override {
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != nullptr && info->socket_context == this;
  }

 private:
  static void OnConnection(void* self, MHD_Connection* connection, void** socket_context,
                           MHD_ConnectionNotificationCode code) {
    if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
    if (static_cast<HttpTlsImpl*>(self)->Prepare(connection)) *socket_context = self;
  }

  // Called by libmicrohttpd when it has accepted a connection, before the TLS handshake: the
  // session gets the current credentials and, with client_ca, must show a certificate the CA
  // signed (the handshake fails otherwise).
  bool Prepare(MHD_Connection* connection) {
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (info == nullptr || info->tls_session == nullptr) {
      spdlog::error("{}: a connection without a TLS session; its requests are refused", kWhat);
      return false;
    }
    auto* session = static_cast<gnutls_session_t>(info->tls_session);
    gnutls_certificate_credentials_t credentials = nullptr;
    {
      std::lock_guard lock(mu_);
      credentials = current_;
    }
    if (int rc = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, credentials); rc < 0) {
      spdlog::error("{}: cannot hand a connection its credentials: {}", kWhat, gnutls_strerror(rc));
      return false;
    }
    if (!files_.client_ca.empty()) {
      gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
      gnutls_session_set_verify_cert(session, nullptr, 0);
    }
    return true;
  }

  void ReloadLoop() {
    SetCurrentThreadName("http-tls-reload");
    std::unique_lock lock(mu_);
    while (!stop_cv_.wait_for(lock, std::chrono::seconds(files_.reload_secs),
                              [this] { return stopping_; })) {
      lock.unlock();
      ReloadIfChanged();
      lock.lock();
    }
  }

  // A renewal caught half-written fails its checks and is tried again once the files change
  // again; meanwhile the previous credentials are served.
  void ReloadIfChanged() {
    std::string snapshot = TlsFilesSnapshot(files_);
    if (snapshot == snapshot_) return;
    snapshot_ = std::move(snapshot);
    StatusOr<TlsPem> pem = ReadTlsFiles(files_, kWhat);
    StatusOr<Credentials> credentials =
        pem.ok() ? MakeCredentials(*pem, files_) : StatusOr<Credentials>(pem.status());
    if (!credentials.ok()) {
      spdlog::warn("{}: the files changed, but the previous certificate is served on: {}", kWhat,
                   credentials.status().message());
      return;
    }
    {
      std::lock_guard lock(mu_);
      current_ = credentials->get();
      made_.push_back(*std::move(credentials));
    }
    spdlog::info("{}: serving the renewed certificate in {} to new connections", kWhat,
                 files_.cert);
  }

  const TlsFiles files_;
  TlsPem start_pem_;      // libmicrohttpd reads it while the daemon runs
  std::string snapshot_;  // the reload thread's only
  std::mutex mu_;
  gnutls_certificate_credentials_t current_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Every credentials ever served: a connection keeps using the ones it was handed after a
  // renewal, and GnuTLS has no reference count to tell when the last is gone (a few kilobytes per
  // renewal, freed when the endpoint stops).
  std::vector<Credentials> made_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::condition_variable stop_cv_;
  std::thread reloader_;
};

}  // namespace

StatusOr<std::unique_ptr<HttpTls>> HttpTls::Start(const TlsFiles& files) {
  std::string snapshot = TlsFilesSnapshot(files);
  TESSERA_ASSIGN_OR_RETURN(TlsPem pem, ReadTlsFiles(files, kWhat));
  TESSERA_ASSIGN_OR_RETURN(Credentials credentials, MakeCredentials(pem, files));
  return std::unique_ptr<HttpTls>(std::make_unique<HttpTlsImpl>(
      files, std::move(pem), std::move(credentials), std::move(snapshot)));
}

}  // namespace tessera::frontend
