#include "tessera/frontend/frontend.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "grpc_endpoint.h"
#include "http_endpoint.h"
#include "infer_submitter.h"
#include "inflate_budget.h"
#include "spdlog/spdlog.h"
#include "tessera/common/clock.h"
#include "tls_files.h"

namespace tessera::frontend {
namespace {

class FrontendImpl final : public Frontend {
 public:
  FrontendImpl(std::unique_ptr<InferSubmitter> submitter, int64_t max_inflating_bytes)
      : submitter_(std::move(submitter)), inflate_budget_(max_inflating_bytes) {}
  ~FrontendImpl() override { Shutdown(0); }

  Status Start(const FrontendOptions& options, ServerCore* core) {
    core_ = core;
    TESSERA_ASSIGN_OR_RETURN(
        grpc_, GrpcEndpoint::Start(options, core, submitter_.get(), &inflate_budget_));
    if (options.http_port >= 0) {
      TESSERA_ASSIGN_OR_RETURN(
          http_, HttpEndpoint::Start(options, core, submitter_.get(), &inflate_budget_));
    }
    return absl::OkStatus();
  }

  int grpc_port() const override { return grpc_ ? grpc_->port() : -1; }
  int http_port() const override { return http_ ? http_->port() : -1; }

  void StopServing() override {
    if (grpc_) grpc_->StopServing();
  }

  void RefreshHealth() override {
    if (grpc_) grpc_->SetHealth(core_->HealthReady());
  }

  void RefuseUntilQuiet(int64_t quiet_ms, int64_t max_ms) override {
    const uint64_t start_ns = MonotonicNs();
    const uint64_t quiet_ns = static_cast<uint64_t>(std::max<int64_t>(quiet_ms, 0)) * 1000000;
    const uint64_t deadline_ns =
        start_ns + static_cast<uint64_t>(std::max<int64_t>(max_ms, 0)) * 1000000;
    bool quiet = false;
    for (;;) {
      const uint64_t now = MonotonicNs();
      // Counted from the start too: a call on the wire needs time to arrive even if none has yet.
      const uint64_t quiet_until = std::max(start_ns, submitter_->last_refusal_ns()) + quiet_ns;
      if (now >= quiet_until) {
        quiet = true;
        break;
      }
      if (now >= deadline_ns) break;
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(std::min(quiet_until, deadline_ns) - now));
    }
    spdlog::info(
        "refused {} inference request(s) while shutting down; closing the endpoints ({} "
        "after {:.0f} ms)",
        submitter_->refused(), quiet ? "no more arriving" : "still arriving",
        static_cast<double>(MonotonicNs() - start_ns) / 1e6);
  }

  void Shutdown(int64_t deadline_ms) override {
    if (!grpc_ && !http_) return;
    // Both wait out the same deadline at once: HTTP's waiting requests finish alongside gRPC's.
    std::thread http_stop;
    if (http_) http_stop = std::thread([&] { http_->Shutdown(deadline_ms); });
    if (grpc_) grpc_->Shutdown(deadline_ms);
    if (http_stop.joinable()) http_stop.join();
    grpc_.reset();
    http_.reset();
    if (Status written = submitter_->FlushTraces(); !written.ok()) {
      spdlog::error("request traces lost: {}", written.message());
    }
  }

 private:
  // Declared first: destroyed after the endpoints that use it.
  std::unique_ptr<InferSubmitter> submitter_;
  InflateBudget inflate_budget_;  // shared by the endpoints
  ServerCore* core_ = nullptr;
  std::unique_ptr<GrpcEndpoint> grpc_;
  std::unique_ptr<HttpEndpoint> http_;
};

}  // namespace

Status CheckTlsFiles(const TlsFiles& files, std::string_view what) {
  if (!files.enabled()) return absl::OkStatus();
  return ReadTlsFiles(files, what).status();
}

StatusOr<std::unique_ptr<Frontend>> Frontend::Start(const FrontendOptions& options,
                                                    ServerCore* core) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<RequestTracer> tracer,
                           options.otlp
                               ? RequestTracer::CreateOpenTelemetry(options.trace, *options.otlp)
                               : RequestTracer::Create(options.trace));
  auto frontend = std::make_unique<FrontendImpl>(
      std::make_unique<InferSubmitter>(core, options.allow_client_shm, std::move(tracer),
                                       options.response_cache_bytes),
      options.max_inflating_bytes);
  TESSERA_RETURN_IF_ERROR(frontend->Start(options, core));
  return std::unique_ptr<Frontend>(std::move(frontend));
}

}  // namespace tessera::frontend
