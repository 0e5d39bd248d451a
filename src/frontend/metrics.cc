#include "tessera/frontend/metrics.h"

#include <exception>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "http_compression.h"
#include "mhd_listener.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace tessera::frontend {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Reads every ready model's statistics on each scrape, so nothing is double-counted or stale.
class ModelStatsCollector final : public prometheus::Collectable {
 public:
  ModelStatsCollector(const ServerCore* core, MetricsSource extra, bool counter_latencies)
      : core_(core), extra_(std::move(extra)), counter_latencies_(counter_latencies) {}

  std::vector<MetricFamily> Collect() const override {
    struct FamilySpec {
      const char* name;
      const char* help;
      MetricType type;
      std::function<double(const dispatch::ModelStatsSnapshot&)> value;
      bool latency = false;  // a cumulative latency counter: off with counter_latencies=false
    };
    const std::vector<FamilySpec> specs = {
        {"nv_inference_request_success", "Number of successful inference requests",
         MetricType::Counter, [](const auto& s) { return double(s.success.count); }},
        {"nv_inference_count", "Number of inferences performed (a batch of N counts N)",
         MetricType::Counter, [](const auto& s) { return double(s.inference_count); }},
        {"nv_inference_exec_count", "Number of batch executions", MetricType::Counter,
         [](const auto& s) { return double(s.execution_count); }},
        {"nv_inference_pending_request_count", "Requests enqueued and not yet executing",
         MetricType::Gauge, [](const auto& s) { return double(s.pending); }},
        {"nv_inference_request_duration_us", "Cumulative end-to-end request duration",
         MetricType::Counter, [](const auto& s) { return (s.success.ns + s.fail.ns) / 1e3; }, true},
        {"nv_inference_queue_duration_us", "Cumulative time requests waited in the queue",
         MetricType::Counter, [](const auto& s) { return s.queue.ns / 1e3; }, true},
        {"nv_inference_compute_input_duration_us", "Cumulative input preparation duration",
         MetricType::Counter, [](const auto& s) { return s.compute_input.ns / 1e3; }, true},
        {"nv_inference_compute_infer_duration_us", "Cumulative model execution duration",
         MetricType::Counter, [](const auto& s) { return s.compute_infer.ns / 1e3; }, true},
        {"nv_inference_compute_output_duration_us", "Cumulative output extraction duration",
         MetricType::Counter, [](const auto& s) { return s.compute_output.ns / 1e3; }, true},
        {"nv_cache_num_hits_per_model", "Requests answered from the response cache",
         MetricType::Counter, [](const auto& s) { return double(s.cache_hit.count); }, true},
        {"nv_cache_num_misses_per_model", "Requests the response cache did not hold",
         MetricType::Counter, [](const auto& s) { return double(s.cache_miss.count); }, true},
        {"nv_cache_hit_duration_per_model",
         "Cumulative cache lookup and copy-out time of hits (us)", MetricType::Counter,
         [](const auto& s) { return s.cache_hit.ns / 1e3; }, true},
        {"nv_cache_miss_duration_per_model", "Cumulative lookup and insert time of misses (us)",
         MetricType::Counter, [](const auto& s) { return s.cache_miss.ns / 1e3; }, true},
        {"tessera_slo_dropped_total",
         "Requests answered UNAVAILABLE because they could no longer meet the model's SLO",
         MetricType::Counter, [](const auto& s) { return double(s.slo_dropped); }},
        {"tessera_sequences_active",
         "A stateful model's sequences started and not yet ended or released (idle ones are "
         "released at the model's next request)",
         MetricType::Gauge, [](const auto& s) { return double(s.active_sequences); }},
    };

    auto entries = core_->Statistics("", "");
    std::vector<std::pair<std::vector<prometheus::ClientMetric::Label>, dispatch::ModelStatsSnapshot>>
        snapshots;
    std::vector<std::pair<std::vector<prometheus::ClientMetric::Label>, dispatch::LatencySummaries>>
        summaries;
    if (entries.ok()) {
      for (const ModelStatsEntry& entry : *entries) {
        std::vector<prometheus::ClientMetric::Label> labels = {
            {"model", entry.name}, {"version", absl::StrCat(entry.version)}};
        for (const auto& [key, value] : entry.metric_tags) {
          labels.push_back({absl::StrCat("_", key), value});
        }
        if (auto values = entry.stats->Summaries()) summaries.emplace_back(labels, *values);
        snapshots.emplace_back(std::move(labels), entry.stats->Snapshot());
      }
    }

    std::vector<MetricFamily> families;
    for (const FamilySpec& spec : specs) {
      if (spec.latency && !counter_latencies_) continue;
      MetricFamily family{spec.name, spec.help, spec.type, {}};
      for (const auto& [labels, snapshot] : snapshots) {
        ClientMetric metric;
        metric.label = labels;
        if (spec.type == MetricType::Counter) {
          metric.counter.value = spec.value(snapshot);
        } else {
          metric.gauge.value = spec.value(snapshot);
        }
        family.metric.push_back(std::move(metric));
      }
      families.push_back(std::move(family));
    }

    MetricFamily failures{"nv_inference_request_failure", "Number of failed inference requests",
                          MetricType::Counter, {}};
    for (const auto& [labels, snapshot] : snapshots) {
      for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
        ClientMetric metric;
        metric.label = labels;
        metric.label.push_back({"reason", reason});
        auto it = snapshot.failures_by_reason.find(reason);
        metric.counter.value = it == snapshot.failures_by_reason.end() ? 0 : double(it->second);
        failures.metric.push_back(std::move(metric));
      }
    }
    families.push_back(std::move(failures));
    MetricFamily worker_batches{"tessera_worker_batches_total",
                                "Batches run by a model's multi-granularity workers, by worker size",
                                MetricType::Counter, {}};
    for (const auto& [labels, snapshot] : snapshots) {
      for (const auto& [size, count] : snapshot.worker_batches) {
        ClientMetric metric;
        metric.label = labels;
        metric.label.push_back({"worker_batch", absl::StrCat(size)});
        metric.counter.value = double(count);
        worker_batches.metric.push_back(std::move(metric));
      }
    }
    if (!worker_batches.metric.empty()) families.push_back(std::move(worker_batches));
    if (!summaries.empty()) AppendSummaries(summaries, families);
    if (extra_) AppendExtra(extra_(), families);
    return families;
  }

 private:
  // Triton's summary families (--metrics-config summary_latencies=true). The cache's appear for
  // the versions the response cache has looked up.
  static void AppendSummaries(
      const std::vector<std::pair<std::vector<ClientMetric::Label>, dispatch::LatencySummaries>>&
          summaries,
      std::vector<MetricFamily>& families) {
    using Summaries = dispatch::LatencySummaries;
    struct SummarySpec {
      const char* name;
      const char* help;
      dispatch::LatencySummary Summaries::*member;
      bool cache;
    };
    constexpr SummarySpec kSpecs[] = {
        {"nv_inference_request_summary_us",
         "Summary of end-to-end request durations of successful requests (us)", &Summaries::request,
         false},
        {"nv_inference_queue_summary_us", "Summary of queue durations (us)", &Summaries::queue,
         false},
        {"nv_inference_compute_input_summary_us", "Summary of input preparation durations (us)",
         &Summaries::compute_input, false},
        {"nv_inference_compute_infer_summary_us", "Summary of model execution durations (us)",
         &Summaries::compute_infer, false},
        {"nv_inference_compute_output_summary_us", "Summary of output extraction durations (us)",
         &Summaries::compute_output, false},
        {"nv_cache_hit_summary_per_model",
         "Summary of response cache lookup and copy-out durations of hits (us)",
         &Summaries::cache_hit, true},
        {"nv_cache_miss_summary_per_model",
         "Summary of response cache lookup and insert durations of misses (us)",
         &Summaries::cache_miss, true},
    };
    for (const SummarySpec& spec : kSpecs) {
      MetricFamily family{spec.name, spec.help, MetricType::Summary, {}};
      for (const auto& [labels, values] : summaries) {
        if (spec.cache && values.cache_hit.count + values.cache_miss.count == 0) continue;
        const dispatch::LatencySummary& summary = values.*spec.member;
        ClientMetric metric;
        metric.label = labels;
        metric.summary.sample_count = summary.count;
        metric.summary.sample_sum = summary.sum_us;
        for (const auto& [quantile, value] : summary.quantiles_us) {
          metric.summary.quantile.push_back({quantile, value});
        }
        family.metric.push_back(std::move(metric));
      }
      if (!family.metric.empty()) families.push_back(std::move(family));
    }
  }

  static void AppendExtra(const std::vector<MetricSample>& samples,
                          std::vector<MetricFamily>& families) {
    std::map<std::string, size_t> index;
    for (const MetricSample& sample : samples) {
      auto [it, fresh] = index.try_emplace(sample.name, families.size());
      if (fresh) {
        families.push_back(MetricFamily{sample.name, sample.help,
                                        sample.counter ? MetricType::Counter : MetricType::Gauge,
                                        {}});
      }
      MetricFamily& family = families[it->second];
      ClientMetric metric;
      for (const auto& [key, value] : sample.labels) metric.label.push_back({key, value});
      if (family.type == MetricType::Counter) {
        metric.counter.value = sample.value;
      } else {
        metric.gauge.value = sample.value;
      }
      family.metric.push_back(std::move(metric));
    }
  }

  const ServerCore* core_;
  MetricsSource extra_;
  const bool counter_latencies_;
};

// Serves GET /metrics from libmicrohttpd's epoll loop: a scrape is rendered on that thread (a few
// milliseconds), and a slow or idle connection holds no thread. prometheus-cpp's own Exposer
// (civetweb, 2 threads) let three idle connections stall every scrape for 30 s.
class MhdMetricsEndpoint final : public MetricsEndpoint {
 public:
  explicit MhdMetricsEndpoint(std::shared_ptr<ModelStatsCollector> collector)
      : collector_(std::move(collector)) {}
  ~MhdMetricsEndpoint() override {
    if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  }

  Status Listen(const std::string& address, int port) {
    constexpr int kIdleTimeoutS = 30;
    StatusOr<MhdListener> listener =
        StartMhdListener("the metrics endpoint", address, port, MHD_USE_EPOLL_INTERNAL_THREAD,
                         &MhdMetricsEndpoint::OnRequest, this,
                         {{MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutS, nullptr}});
    if (!listener.ok()) return listener.status();
    daemon_ = listener->daemon;
    return absl::OkStatus();
  }

 private:
  static MHD_Result OnRequest(void* self, MHD_Connection* connection, const char* url,
                              const char* method, const char* /*version*/,
                              const char* /*upload_data*/, size_t* upload_data_size,
                              void** closure) {
    static int started;  // the request's closure once its headers are in: answer after any body
    if (*closure == nullptr) {
      *closure = &started;
      return MHD_YES;
    }
    if (*upload_data_size > 0) {
      *upload_data_size = 0;  // a body is read and ignored
      return MHD_YES;
    }
    int code = 200;
    std::string body;
    const char* type = "text/plain; charset=utf-8";
    const std::string_view verb(method);
    if (std::string_view(url) != "/metrics") {
      code = 404;
      body = absl::StrCat("no such endpoint: ", url, " (the metrics are at /metrics)\n");
    } else if (verb != "GET" && verb != "HEAD") {
      code = 405;
      body = absl::StrCat(method, " /metrics: use GET\n");
    } else {
      try {
        body = prometheus::TextSerializer().Serialize(
            static_cast<MhdMetricsEndpoint*>(self)->collector_->Collect());
        type = "text/plain; version=0.0.4; charset=utf-8";  // Prometheus's text format
      } catch (const std::exception& e) {                   // nothing may escape into C code
        code = 500;
        body = absl::StrCat("cannot render the metrics: ", e.what(), "\n");
      }
    }
    HttpEncoding encoding = HttpEncoding::kIdentity;
    if (code == 200) {  // Prometheus asks for gzip
      encoding = ChooseResponseEncoding(
          MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Accept-Encoding"));
      if (encoding != HttpEncoding::kIdentity) body = Deflate(body, encoding);
    }
    MHD_Response* response =
        MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", type);
    if (encoding != HttpEncoding::kIdentity) {
      MHD_add_response_header(response, "Content-Encoding", EncodingName(encoding));
    }
    const MHD_Result queued = MHD_queue_response(connection, code, response);
    MHD_destroy_response(response);
    return queued;
  }

  const std::shared_ptr<ModelStatsCollector> collector_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const MetricsOptions& options,
                                                                  const ServerCore* core,
                                                                  MetricsSource extra) {
  auto endpoint = std::make_unique<MhdMetricsEndpoint>(
      std::make_shared<ModelStatsCollector>(core, std::move(extra), options.counter_latencies));
  TESSERA_RETURN_IF_ERROR(endpoint->Listen(options.address, options.port));
  return std::unique_ptr<MetricsEndpoint>(std::move(endpoint));
}

}  // namespace tessera::frontend
