#include "server_metrics.h"

#include <string>
#include <utility>
#include <vector>

namespace tessera::server {

frontend::MetricsSource ServerMetrics(const ControlLoop* control, const ExecutorPool* pool,
                                      const HostMetrics* host) {
  return [c = control, p = pool, host] {
    std::vector<frontend::MetricSample> samples;
    if (c) samples = ControlMetrics(c->status());
    for (const auto& [slot, counters] : p->input_pool_counters()) {
      const std::string executor = std::to_string(slot);
      for (const auto& [path, batches] : {std::pair{"pooled", counters.batches_pooled},
                                          {"gathered", counters.batches_gathered}}) {
        samples.push_back({"tessera_input_pool_batches_total",
                           "Batches sent from the executor's input pool (no copy at batch time) "
                           "or gathered into its input ring at batch time",
                           true,
                           {{"executor", executor}, {"path", path}},
                           double(batches)});
      }
      struct Counter {
        const char* name;
        const char* help;
        uint64_t value;
      };
      for (const Counter& counter :
           {Counter{"tessera_input_pool_unstaged_requests_total",
                    "Requests routed to a gpulet that found no room in its input pool",
                    counters.requests_not_staged},
            Counter{"tessera_input_pool_spilled_batches_total",
                    "Pooled batches that straddled the wrap of the executor's input pool and "
                    "had their head copied after their tail",
                    counters.batches_spilled},
            Counter{"tessera_input_pool_mirrored_batches_total",
                    "Batches that read one or more inputs from the executor's input mirror "
                    "(copied at arrival) instead of the input ring",
                    counters.batches_mirrored}}) {
        samples.push_back(
            {counter.name, counter.help, true, {{"executor", executor}}, double(counter.value)});
      }
    }
    if (host) {
      std::vector<frontend::MetricSample> cpu = host->Samples();
      samples.insert(samples.end(), cpu.begin(), cpu.end());
    }
    return samples;
  };
}

}  // namespace tessera::server
