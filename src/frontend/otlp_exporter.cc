#include "otlp_exporter.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "otel_spans.h"
#include "spdlog/spdlog.h"
#include "tessera/common/clock.h"
#include "tessera/otlp_trace.pb.h"

namespace tessera::frontend {
namespace {

constexpr int64_t kLogEveryNs = 60'000'000'000;  // a failing collector is logged once a minute
constexpr size_t kMaxAnswerBytes = 1024;         // of a collector's error answer, for the log

// True when the last log of this kind is more than a minute old (and notes the time).
bool TimeToLog(int64_t* last_ns) {
  const auto now = static_cast<int64_t>(MonotonicNs());
  if (*last_ns >= 0 && now - *last_ns < kLogEveryNs) return false;
  *last_ns = now;
  return true;
}

class CurlOtlpSink final : public OtlpSink {
 public:
  CurlOtlpSink(std::string url, CURL* curl, curl_slist* headers)
      : url_(std::move(url)), curl_(curl), headers_(headers) {}
  ~CurlOtlpSink() override {
    curl_easy_cleanup(curl_);
    curl_slist_free_all(headers_);
  }

  Status Post(const std::string& body) override {
    answer_.clear();
    error_[0] = '\0';
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    const CURLcode sent = curl_easy_perform(curl_);
    if (sent != CURLE_OK) {
      return absl::UnavailableError(
          absl::StrCat("cannot send spans to the OpenTelemetry collector at ", url_, ": ",
                       error_[0] != '\0' ? error_ : curl_easy_strerror(sent)));
    }
    long code = 0;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300) return absl::OkStatus();
    // A collector's error answer is a protobuf Status, or text from a proxy: shown when text.
    const bool text = std::all_of(answer_.begin(), answer_.end(), [](char c) {
      return absl::ascii_isprint(static_cast<unsigned char>(c)) || c == '\n';
    });
    return absl::UnavailableError(
        absl::StrCat("the OpenTelemetry collector at ", url_, " answered HTTP ", code,
                     text && !answer_.empty() ? ": " : "", text ? answer_ : ""));
  }

  static size_t Collect(char* data, size_t size, size_t count, void* self) {
    std::string& answer = static_cast<CurlOtlpSink*>(self)->answer_;
    const size_t bytes = size * count;
    answer.append(data,
                  std::min(bytes, kMaxAnswerBytes - std::min(answer.size(), kMaxAnswerBytes)));
    return bytes;
  }

  char* error_buffer() { return error_; }

 private:
  const std::string url_;
  CURL* const curl_;
  curl_slist* const headers_;
  std::string answer_;
  char error_[CURL_ERROR_SIZE] = {};
};

}  // namespace

StatusOr<std::unique_ptr<OtlpSink>> MakeCurlOtlpSink(const OtlpExportSettings& settings) {
  static std::once_flag curl_ready;
  static CURLcode curl_init = CURLE_OK;
  std::call_once(curl_ready, [] { curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (curl_init != CURLE_OK) {
    return absl::InternalError(
        absl::StrCat("libcurl did not start: ", curl_easy_strerror(curl_init)));
  }
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("libcurl could not make a connection handle");
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/x-protobuf");
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for big batches
  for (const auto& [name, value] : settings.headers) {
    headers = curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
  }
  auto sink = std::make_unique<CurlOtlpSink>(settings.url, curl, headers);
  curl_easy_setopt(curl, CURLOPT_URL, settings.url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(settings.timeout_ms));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts in a threaded server
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "tessera-server");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &CurlOtlpSink::Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink.get());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, sink->error_buffer());
  return std::unique_ptr<OtlpSink>(std::move(sink));
}

OtlpExporter::OtlpExporter(OtlpExportSettings settings, std::unique_ptr<OtlpSink> sink,
                           int64_t wall_offset_ns)
    : settings_(std::move(settings)), sink_(std::move(sink)), wall_offset_ns_(wall_offset_ns) {
  thread_ = std::thread([this] { Run(); });
}

OtlpExporter::~OtlpExporter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  if (counts_.exported_spans + counts_.failed_spans + counts_.dropped_spans > 0) {
    spdlog::info(
        "OpenTelemetry traces: {} spans sent to {}, {} lost in failed exports, {} dropped "
        "(queue full)",
        counts_.exported_spans, settings_.url, counts_.failed_spans, counts_.dropped_spans);
  }
}

bool OtlpExporter::Add(TraceRecord record, uint64_t trace_number) {
  const int spans = SpanCount(record);
  absl::MutexLock lock(&mu_);
  if (stopping_ || queued_spans_ + spans > settings_.max_queue_size) {
    counts_.dropped_spans += spans;
    if (TimeToLog(&last_drop_log_ns_)) {
      spdlog::warn(
          "OpenTelemetry: the span queue is full ({} spans, bsp_max_queue_size): spans are "
          "dropped ({} so far); the collector at {} is slow or away",
          settings_.max_queue_size, counts_.dropped_spans, settings_.url);
    }
    return false;
  }
  queued_spans_ += spans;
  ++added_;
  queue_.push_back({std::move(record), trace_number, spans});
  return true;
}

void OtlpExporter::Flush() {
  absl::MutexLock lock(&mu_);
  const uint64_t target = added_;
  flush_until_ = std::max(flush_until_, target);
  auto done = [this, target]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return handled_ >= target || stopping_; };
  mu_.Await(absl::Condition(&done));
}

OtlpExporter::Counts OtlpExporter::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

void OtlpExporter::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || queued_spans_ >= settings_.max_export_batch_size ||
             (flush_until_ > handled_ && !queue_.empty());
    };
    const bool woken = mu_.AwaitWithTimeout(absl::Condition(&ready),
                                            absl::Milliseconds(settings_.schedule_delay_ms));
    // At the delay's end, a flush or a stop, all that is queued goes, in batches. Woken by a full
    // batch, only full batches go: the rest waits to fill one, or for the delay (sending it at
    // once would make many small exports under steady load).
    auto send_all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !woken || stopping_ || flush_until_ > handled_;
    };
    // A stop or a flush waits for the sends: after one fails, the rest is given up on.
    bool give_up = false;
    while (!queue_.empty() && (send_all() || queued_spans_ >= settings_.max_export_batch_size)) {
      std::deque<Pending> batch;
      int64_t spans = 0;
      while (!queue_.empty() &&
             (batch.empty() || spans + queue_.front().spans <= settings_.max_export_batch_size)) {
        spans += queue_.front().spans;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_spans_ -= spans;
      if (give_up) {
        counts_.failed_spans += spans;
        handled_ += batch.size();
        continue;
      }
      const uint64_t failed_before = counts_.failed_spans;
      mu_.Unlock();
      Export(batch);
      mu_.Lock();
      const bool waited_for = stopping_ || flush_until_ > handled_;
      if (waited_for && counts_.failed_spans > failed_before) give_up = true;
    }
    if (stopping_) return;
  }
}

void OtlpExporter::Export(std::deque<Pending>& batch) {
  otlp::ExportTraceServiceRequest request;
  otlp::ResourceSpans* resource_spans = request.add_resource_spans();
  for (const auto& [key, value] : settings_.resource) {
    otlp::KeyValue* attribute = resource_spans->mutable_resource()->add_attributes();
    attribute->set_key(key);
    attribute->mutable_value()->set_string_value(value);
  }
  otlp::ScopeSpans* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name("tessera");
  int64_t spans = 0;
  for (const Pending& pending : batch) {
    AppendTraceSpans(pending.record, pending.trace_number, wall_offset_ns_, ids_,
                     scope_spans->mutable_spans());
    spans += pending.spans;
  }
  const Status sent = sink_->Post(request.SerializeAsString());
  absl::MutexLock lock(&mu_);
  handled_ += batch.size();
  if (sent.ok()) {
    counts_.exported_spans += spans;
    return;
  }
  counts_.failed_spans += spans;
  if (TimeToLog(&last_failure_log_ns_)) {
    spdlog::warn("OpenTelemetry: {} ({} spans lost so far)", sent.message(), counts_.failed_spans);
  }
}

}  // namespace tessera::frontend
