#include "tessera/frontend/metrics.h"

#include <exception>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"

namespace tessera::frontend {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Reads every ready model's statistics on each scrape, so nothing is double-counted or stale.
class ModelStatsCollector final : public prometheus::Collectable {
 public:
  ModelStatsCollector(const ServerCore* core, MetricsSource extra)
      : core_(core), extra_(std::move(extra)) {}

  std::vector<MetricFamily> Collect() const override {
    struct FamilySpec {
      const char* name;
      const char* help;
      MetricType type;
      std::function<double(const dispatch::ModelStatsSnapshot&)> value;
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
         MetricType::Counter, [](const auto& s) { return (s.success.ns + s.fail.ns) / 1e3; }},
        {"nv_inference_queue_duration_us", "Cumulative time requests waited in the queue",
         MetricType::Counter, [](const auto& s) { return s.queue.ns / 1e3; }},
        {"nv_inference_compute_input_duration_us", "Cumulative input preparation duration",
         MetricType::Counter, [](const auto& s) { return s.compute_input.ns / 1e3; }},
        {"nv_inference_compute_infer_duration_us", "Cumulative model execution duration",
         MetricType::Counter, [](const auto& s) { return s.compute_infer.ns / 1e3; }},
        {"nv_inference_compute_output_duration_us", "Cumulative output extraction duration",
         MetricType::Counter, [](const auto& s) { return s.compute_output.ns / 1e3; }},
        {"nv_cache_num_hits_per_model", "Requests answered from the response cache",
         MetricType::Counter, [](const auto& s) { return double(s.cache_hit.count); }},
        {"nv_cache_num_misses_per_model", "Requests the response cache did not hold",
         MetricType::Counter, [](const auto& s) { return double(s.cache_miss.count); }},
        {"nv_cache_hit_duration_per_model",
         "Cumulative cache lookup and copy-out time of hits (us)", MetricType::Counter,
         [](const auto& s) { return s.cache_hit.ns / 1e3; }},
        {"nv_cache_miss_duration_per_model", "Cumulative lookup and insert time of misses (us)",
         MetricType::Counter, [](const auto& s) { return s.cache_miss.ns / 1e3; }},
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
    if (entries.ok()) {
      for (const ModelStatsEntry& entry : *entries) {
        snapshots.push_back({{{"model", entry.name}, {"version", absl::StrCat(entry.version)}},
                             entry.stats->Snapshot()});
      }
    }

    std::vector<MetricFamily> families;
    for (const FamilySpec& spec : specs) {
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
    if (extra_) AppendExtra(extra_(), families);
    return families;
  }

 private:
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
};

class PrometheusMetricsEndpoint final : public MetricsEndpoint {
 public:
  PrometheusMetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                            std::shared_ptr<ModelStatsCollector> collector)
      : exposer_(std::move(exposer)), collector_(std::move(collector)) {
    exposer_->RegisterCollectable(collector_);
  }
  ~PrometheusMetricsEndpoint() override { exposer_->RemoveCollectable(collector_); }

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<ModelStatsCollector> collector_;
};

}  // namespace

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address,
                                                                  int port,
                                                                  const ServerCore* core,
                                                                  MetricsSource extra) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb takes "host:port"; it throws when the port cannot be bound.
    exposer = std::make_unique<prometheus::Exposer>(absl::StrCat(address, ":", port), 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the metrics endpoint on ", address, ":", port, ": ", e.what()));
  }
  return std::unique_ptr<MetricsEndpoint>(std::make_unique<PrometheusMetricsEndpoint>(
      std::move(exposer), std::make_shared<ModelStatsCollector>(core, std::move(extra))));
}

}  // namespace tessera::frontend
