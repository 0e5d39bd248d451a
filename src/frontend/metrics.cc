#include "tessera/frontend/metrics.h"

#include <exception>
#include <functional>

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
  explicit ModelStatsCollector(const ServerCore* core) : core_(core) {}

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
    return families;
  }

 private:
  const ServerCore* core_;
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
                                                                  const ServerCore* core) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb takes "host:port"; it throws when the port cannot be bound.
    exposer = std::make_unique<prometheus::Exposer>(absl::StrCat(address, ":", port), 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the metrics endpoint on ", address, ":", port, ": ", e.what()));
  }
  return std::unique_ptr<MetricsEndpoint>(std::make_unique<PrometheusMetricsEndpoint>(
      std::move(exposer), std::make_shared<ModelStatsCollector>(core)));
}

}  // namespace tessera::frontend
