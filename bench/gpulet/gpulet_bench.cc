// tessera-gpulet-bench: gpulets of different sizes on one device, through the server's own data
// plane (PartitionManager, ExecutorPool, ModelManager, PlanApplier, ModelQueue lanes), without the
// gRPC frontend or the planner (issue 5 item 8; GSLICE seed 000 §5 for the figures compared).
//
//   tessera-gpulet-bench --repository DIR --model NAME:PCT:BATCH --model NAME:PCT:BATCH
//                        [--devices cpu|gpu] [--mechanism auto|mps|green|none]
//                        [--input-mirror auto|host|off] [--spill-share S]
//                        [--duration-s S] [--concurrency C] [--swap-pct PCT] [--json FILE]
//
// Every model gets a gpulet of PCT % of device 0 running batches of up to BATCH (duty cycle 0:
// a batch goes as soon as the gpulet is free). Phases, each a closed loop of C requests in flight
// per model for S seconds:
//   1. each model alone on its gpulet (the other model's lanes are its configured instances, idle);
//   2. all models together, each on its gpulet: the slowdown against 1 is the isolation figure
//      (GSLICE reports <= 3 %);
//   3. all models together while the first model's gpulet is resized to --swap-pct: the shadow is
//      started, loaded and warmed while serving, then the lanes switch (ReplaceLanes). Reports the
//      switch's dispatch gap and drain, the longest pause between two answers of that model, and
//      every failed request (the rule: zero).
// Exit status 0 only when no request failed and the resize switched lanes.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "executor_pool.h"
#include "model_manager.h"
#include "plan_applier.h"
#include "tessera/common/clock.h"
#include "tessera/common/logging.h"
#include "tessera/common/mutex_mode.h"
#include "tessera/partition/partition.h"

namespace tessera::server {
namespace {

struct GpuletSpec {
  std::string model;
  int pct = 50;
  int batch = 1;
};

StatusOr<GpuletSpec> ParseSpec(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  GpuletSpec spec;
  if (parts.size() != 3 || parts[0].empty()) {
    return absl::InvalidArgumentError("--model '" + text + "': expected NAME:PCT:BATCH");
  }
  spec.model = parts[0];
  try {
    spec.pct = std::stoi(parts[1]);
    spec.batch = std::stoi(parts[2]);
  } catch (const std::exception&) {
    return absl::InvalidArgumentError("--model '" + text + "': PCT and BATCH must be integers");
  }
  if (spec.pct < 1 || spec.pct > 100 || spec.batch < 1) {
    return absl::InvalidArgumentError("--model '" + text + "': PCT in 1..100, BATCH >= 1");
  }
  return spec;
}

// One row of random (FP32) or zero (other types) inputs per request, built once per model and
// shared by all its requests (the executor copies them; nothing writes them).
struct ModelInputs {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorView> views;
};

StatusOr<ModelInputs> MakeInputs(const repository::ModelConfig& config) {
  ModelInputs inputs;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  inputs.bytes.reserve(config.inputs.size());
  for (const repository::TensorConfig& tensor : config.inputs) {
    Shape shape;
    if (config.max_batch_size > 0) shape.push_back(1);
    int64_t elements = 1;
    for (int64_t dim : tensor.dims) {
      if (dim < 0) {
        return absl::InvalidArgumentError("model '" + config.name + "' input '" + tensor.name +
                                          "' has a variable dim: give it a fixed shape in its "
                                          "config.yaml for this benchmark");
      }
      shape.push_back(dim);
      elements *= dim;
    }
    const size_t size = DataTypeByteSize(tensor.data_type);
    if (size == 0) {
      return absl::InvalidArgumentError("model '" + config.name + "' input '" + tensor.name +
                                        "': only fixed-size data types are supported");
    }
    auto& bytes = inputs.bytes.emplace_back(static_cast<size_t>(elements) * size, 0);
    if (tensor.data_type == DataType::kFp32) {
      auto* values = reinterpret_cast<float*>(bytes.data());
      for (int64_t i = 0; i < elements; ++i) values[i] = dist(rng);
    }
    inputs.views.push_back(TensorView{tensor.name, tensor.data_type, shape, bytes.data(),
                                      bytes.size()});
  }
  return inputs;
}

double Percentile(std::vector<uint64_t> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(q * values.size()));
  return static_cast<double>(values[index]) / 1e6;
}

// What one model's closed loop saw in one phase.
struct LoadResult {
  uint64_t ok = 0;
  uint64_t failed = 0;
  std::map<std::string, uint64_t> failures;  // message -> count
  std::vector<uint64_t> latency_ns;
  uint64_t max_answer_gap_ns = 0;  // longest time without an answer while requests were out
  double window_s = 0;
  double throughput() const { return window_s > 0 ? ok / window_s : 0; }
};

// Keeps `concurrency` requests of one model in flight for `duration`; each answer sends the next.
class ClosedLoop {
 public:
  ClosedLoop(ModelManager* manager, std::string model, const ModelInputs* inputs, int concurrency)
      : manager_(manager), model_(std::move(model)), inputs_(inputs), concurrency_(concurrency) {}

  LoadResult Run(std::chrono::duration<double> duration) {
    {
      std::lock_guard lock(mu_);
      result_ = LoadResult{};
      start_ns_ = MonotonicNs();
      stop_ns_ = start_ns_ + static_cast<uint64_t>(duration.count() * 1e9);
      last_answer_ns_ = start_ns_;
      in_flight_ = concurrency_;
    }
    for (int i = 0; i < concurrency_; ++i) Send();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ == 0; });
    result_.window_s = static_cast<double>(MonotonicNs() - start_ns_) / 1e9;
    return result_;
  }

 private:
  // One more request in the slot in_flight_ already counts (an answer hands its slot on).
  void Send() {
    auto request = std::make_unique<dispatch::Request>();
    request->inputs = inputs_->views;
    request->arrival_ns = MonotonicNs();
    const uint64_t sent_ns = request->arrival_ns;
    request->done = [this, sent_ns](StatusOr<dispatch::Response> response) {
      Answered(sent_ns, response.status());
    };
    auto model = manager_->GetReadyModel(model_, "");
    Status enqueued = model.ok() ? model->queue->Enqueue(std::move(request)) : model.status();
    if (enqueued.code() == absl::StatusCode::kAborted) {  // a reload swapped the version: retry
      model = manager_->GetReadyModel(model_, "");
      enqueued = model.ok() ? model->queue->Enqueue(std::move(request)) : model.status();
    }
    // Refused at once: counted, and its slot is not refilled (a model that refuses everything
    // would otherwise resend from here without end).
    if (!enqueued.ok()) Answered(sent_ns, enqueued, /*may_resend=*/false);
  }

  void Answered(uint64_t sent_ns, const Status& status, bool may_resend = true) {
    const uint64_t now = MonotonicNs();
    bool again = false;
    {
      std::lock_guard lock(mu_);
      result_.max_answer_gap_ns = std::max(result_.max_answer_gap_ns, now - last_answer_ns_);
      last_answer_ns_ = now;
      if (status.ok()) {
        ++result_.ok;
        result_.latency_ns.push_back(now - sent_ns);
      } else {
        ++result_.failed;
        ++result_.failures[std::string(status.message())];
      }
      again = may_resend && now < stop_ns_;
      if (!again && --in_flight_ == 0) cv_.notify_all();
    }
    if (again) Send();
  }

  ModelManager* const manager_;
  const std::string model_;
  const ModelInputs* const inputs_;
  const int concurrency_;
  uint64_t start_ns_ = 0;
  uint64_t stop_ns_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  uint64_t last_answer_ns_ = 0;
  LoadResult result_;
};

scheduler::Gpulet MakeGpulet(const GpuletSpec& spec, int pct) {
  scheduler::Gpulet gpulet;
  gpulet.gpu = 0;
  gpulet.partition_pct = pct;
  gpulet.duty_ms = 0;
  gpulet.models.push_back(scheduler::GpuletModel{spec.model, spec.batch, 1, 0});
  return gpulet;
}

scheduler::Plan MakePlan(std::vector<scheduler::Gpulet> gpulets) {
  scheduler::Plan plan;
  plan.policy = "gpulet-bench";
  plan.num_gpus = 1;
  plan.gpulets = std::move(gpulets);
  return plan;
}

std::string Json(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string ResultJson(const LoadResult& r) {
  std::ostringstream out;
  out << "{\"ok\": " << r.ok << ", \"failed\": " << r.failed << ", \"throughput_rps\": "
      << r.throughput() << ", \"p50_ms\": " << Percentile(r.latency_ns, 0.5)
      << ", \"p99_ms\": " << Percentile(r.latency_ns, 0.99)
      << ", \"max_answer_gap_ms\": " << r.max_answer_gap_ns / 1e6 << ", \"failures\": {";
  bool first = true;
  for (const auto& [message, count] : r.failures) {
    out << (first ? "" : ", ") << Json(message) << ": " << count;
    first = false;
  }
  out << "}}";
  return out.str();
}

// Runs every model's closed loop at once; results in the order of `loops`.
// Batches the running executors sent from their input pools (no gather copy) and gathered, summed.
// Executors leave with the plan that drops them, so a phase is read before the next apply.
struct PoolBatches {
  uint64_t pooled = 0;
  uint64_t gathered = 0;
  uint64_t spilled = 0;   // of the pooled, those whose wrapped head was copied to the spill area
  uint64_t mirrored = 0;  // batches that read an input from the executor's input mirror
  PoolBatches operator-(const PoolBatches& o) const {
    return {pooled - o.pooled, gathered - o.gathered, spilled - o.spilled, mirrored - o.mirrored};
  }
  PoolBatches& operator+=(const PoolBatches& o) {
    pooled += o.pooled;
    gathered += o.gathered;
    spilled += o.spilled;
    mirrored += o.mirrored;
    return *this;
  }
};

PoolBatches PoolBatchesNow(const ExecutorPool& pool) {
  PoolBatches sum;
  for (const auto& [slot, counters] : pool.input_pool_counters()) {
    sum += {counters.batches_pooled, counters.batches_gathered, counters.batches_spilled,
            counters.batches_mirrored};
  }
  return sum;
}

std::string PoolBatchesJson(const PoolBatches& b) {
  std::ostringstream out;
  out << "{\"pooled\": " << b.pooled << ", \"gathered\": " << b.gathered
      << ", \"spilled\": " << b.spilled << ", \"mirrored\": " << b.mirrored << "}";
  return out.str();
}

std::vector<LoadResult> RunTogether(std::vector<std::unique_ptr<ClosedLoop>>& loops, double seconds,
                                    const std::function<void()>& during = nullptr) {
  std::vector<LoadResult> results(loops.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < loops.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = loops[i]->Run(std::chrono::duration<double>(seconds)); });
  }
  if (during) during();
  for (std::thread& t : threads) t.join();
  return results;
}

int Main(int argc, char** argv) {
  CLI::App app{"tessera-gpulet-bench: isolation of gpulets on one device, and a live resize"};
  std::string repository, devices = "auto", mechanism = "auto", json_path;
  std::string input_mirror = "auto";
  double spill_share = InputPoolOptions::kDefaultSpillShare;
  std::vector<std::string> model_args;
  double duration_s = 5;
  int concurrency = 0;
  int swap_pct = 0;
  bool mps_start_daemon = false;
  int log_verbose = 0;
  std::string executor_binary =
      (std::filesystem::path(std::filesystem::read_symlink("/proc/self/exe")).parent_path() /
       "tessera-executor")
          .string();
  app.add_option("--executor", executor_binary, "tessera-executor binary (default: beside this one)");
  app.add_option("--repository", repository, "Model repository (configs/models layout)")->required();
  app.add_option("--model", model_args, "NAME:PCT:BATCH, one per gpulet (at least 2)")->required();
  app.add_option("--devices", devices, "auto | cpu | gpu (executors.devices)");
  app.add_option("--mechanism", mechanism, "auto | mps | green | none (executors.partition_mechanism)");
  app.add_flag("--mps-start-daemon", mps_start_daemon, "Start an MPS control daemon if none runs");
  app.add_option("--input-mirror", input_mirror,
                 "auto | host | off (executors.input_mirror): the GPU-resident input pool, for "
                 "an A/B against off")
      ->check(CLI::IsMember({"auto", "host", "off"}));
  app.add_option("--spill-share", spill_share,
                 "Share of each input pool region kept after its sub-ring for the head of a batch "
                 "that wraps round it (0: such batches are gathered)");
  app.add_option("--duration-s", duration_s, "Seconds per phase");
  app.add_option("--concurrency", concurrency, "Requests in flight per model (default 2 x BATCH)");
  app.add_option("--swap-pct", swap_pct, "New size of the first model's gpulet in phase 3 "
                                         "(default: its PCT / 2, at least 1)");
  app.add_option("--json", json_path, "Write the figures as JSON here");
  app.add_option("--log-verbose", log_verbose, "0 = info, 1 = debug");
  CLI11_PARSE(app, argc, argv);
  InitLogging(log_verbose, "gpulet-bench");

  std::vector<GpuletSpec> specs;
  for (const std::string& text : model_args) {
    auto spec = ParseSpec(text);
    if (!spec.ok()) {
      std::fprintf(stderr, "%s\n", std::string(spec.status().message()).c_str());
      return 2;
    }
    specs.push_back(*spec);
  }
  if (specs.size() < 2) {
    std::fprintf(stderr, "give at least two --model gpulets\n");
    return 2;
  }
  if (swap_pct <= 0) swap_pct = std::max(1, specs[0].pct / 2);

  partition::PartitionOptions partition_options;
  partition_options.mechanism = mechanism;
  partition_options.devices = devices;
  partition_options.mps_start_daemon = mps_start_daemon;
  auto partitions = partition::PartitionManager::Create(partition_options);
  if (!partitions.ok()) {
    std::fprintf(stderr, "partitions: %s\n", std::string(partitions.status().message()).c_str());
    return 2;
  }
  partition::PartitionManager* manager_of_partitions = partitions->get();
  const bool on_gpu = manager_of_partitions->on_gpu();
  std::printf("partitions: %s (mechanism %s)\n", manager_of_partitions->reason().c_str(),
              std::string(partition::MechanismName(manager_of_partitions->mechanism())).c_str());

  ExecutorPoolOptions pool_options;
  pool_options.executors = 1;  // the models' configured instances; idle once the plans apply
  pool_options.launch.binary = executor_binary;
  pool_options.launch.device = on_gpu ? "cuda:0" : "cpu";
  pool_options.launch.threads = 1;
  pool_options.launch.input_mirror = input_mirror;
  pool_options.launch.input_pool_spill_share = spill_share;
  auto pool = ExecutorPool::Start(pool_options);
  if (!pool.ok()) {
    std::fprintf(stderr, "executors: %s\n", std::string(pool.status().message()).c_str());
    return 1;
  }
  ModelManagerOptions manager_options;
  manager_options.repository_roots = {repository};
  manager_options.control_mode = ModelControlMode::kNone;
  ModelManager manager(manager_options, pool->get());
  manager.LoadAtStartup({});

  std::map<std::string, ModelInputs> inputs;
  for (const GpuletSpec& spec : specs) {
    auto ready = manager.GetReadyModel(spec.model, "");
    if (!ready.ok()) {
      std::fprintf(stderr, "model '%s': %s\n", spec.model.c_str(),
                   std::string(ready.status().message()).c_str());
      return 2;
    }
    if (ready->config->max_batch_size < spec.batch) {
      std::fprintf(stderr, "model '%s': BATCH %d exceeds its max_batch_size %d\n",
                   spec.model.c_str(), spec.batch, ready->config->max_batch_size);
      return 2;
    }
    auto made = MakeInputs(*ready->config);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", std::string(made.status().message()).c_str());
      return 2;
    }
    inputs[spec.model] = std::move(made).value();
  }

  PlanApplierOptions applier_options = PlacedBy(manager_of_partitions);
  PlanApplier applier(applier_options, pool->get());
  bool apply_failed = false;
  auto apply = [&](const scheduler::Plan& plan) {
    ApplyReport report = applier.Apply(plan, manager.ServedModels());
    for (const std::string& error : report.errors) {
      std::fprintf(stderr, "plan: %s\n", error.c_str());
      apply_failed = true;
    }
    return report;
  };

  std::vector<std::unique_ptr<ClosedLoop>> loops;
  for (const GpuletSpec& spec : specs) {
    loops.push_back(std::make_unique<ClosedLoop>(&manager, spec.model, &inputs[spec.model],
                                                 concurrency > 0 ? concurrency : 2 * spec.batch));
  }
  std::vector<scheduler::Gpulet> all;
  for (const GpuletSpec& spec : specs) all.push_back(MakeGpulet(spec, spec.pct));

  // Phase 1: alone. A short warm-up run first, so the first figures are not the first batches.
  std::vector<LoadResult> alone;
  PoolBatches alone_batches;
  for (size_t i = 0; i < specs.size(); ++i) {
    apply(MakePlan({all[i]}));
    loops[i]->Run(std::chrono::duration<double>(std::min(1.0, duration_s / 4)));
    const PoolBatches before = PoolBatchesNow(**pool);
    alone.push_back(loops[i]->Run(std::chrono::duration<double>(duration_s)));
    alone_batches += PoolBatchesNow(**pool) - before;
  }
  // Phase 2: together.
  apply(MakePlan(all));
  const PoolBatches before_together = PoolBatchesNow(**pool);
  std::vector<LoadResult> together = RunTogether(loops, duration_s);
  const PoolBatches together_batches = PoolBatchesNow(**pool) - before_together;
  // Phase 3: the first gpulet resized while all are under load.
  std::vector<scheduler::Gpulet> resized = all;
  resized[0].partition_pct = swap_pct;
  ApplyReport swap_report;
  std::vector<LoadResult> during_swap = RunTogether(loops, duration_s, [&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(duration_s / 3));
    swap_report = apply(MakePlan(resized));
  });
  const ModelSwitch* first_switch = nullptr;
  for (const ModelSwitch& s : swap_report.switches) {
    if (s.model == specs[0].model) first_switch = &s;
  }

  std::printf("\n| model | gpulet | batch | alone rps | together rps | slowdown | alone p50 ms | "
              "together p50 ms | alone p99 ms | together p99 ms |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < specs.size(); ++i) {
    const double slowdown =
        together[i].throughput() > 0 ? alone[i].throughput() / together[i].throughput() - 1 : 0;
    std::printf("| %s | %d %% | %d | %.1f | %.1f | %+.1f %% | %.3f | %.3f | %.3f | %.3f |\n",
                specs[i].model.c_str(), specs[i].pct, specs[i].batch, alone[i].throughput(),
                together[i].throughput(), slowdown * 100, Percentile(alone[i].latency_ns, 0.5),
                Percentile(together[i].latency_ns, 0.5), Percentile(alone[i].latency_ns, 0.99),
                Percentile(together[i].latency_ns, 0.99));
  }
  uint64_t failed = 0;
  for (const auto* phase : {&alone, &together, &during_swap}) {
    for (const LoadResult& r : *phase) failed += r.failed;
  }
  std::printf(
      "\nresize of %s's gpulet %d %% -> %d %% under load: shadow start+load+warm-up %.1f ms "
      "(%s), %s",
      specs[0].model.c_str(), specs[0].pct, swap_pct, swap_report.start_ns / 1e6,
      swap_report.weights_shared > 0 ? "weights mapped from the active gpulet"
                                     : "own copy of the weights",
      first_switch ? "" : "NO LANE SWITCH\n");
  if (first_switch) {
    std::printf("switch gap %.1f us, %zu queued requests moved, old lanes drained in %.2f ms; "
                "longest pause between two answers of %s during the phase: %.2f ms (p99 latency "
                "together: %.2f ms)\n",
                first_switch->swap.gap_ns / 1e3, first_switch->swap.moved_requests,
                first_switch->swap.drain_ns / 1e6, specs[0].model.c_str(),
                during_swap[0].max_answer_gap_ns / 1e6, Percentile(together[0].latency_ns, 0.99));
  }
  std::printf("failed requests over all phases: %llu\n", static_cast<unsigned long long>(failed));
  for (const auto& [phase, b] :
       {std::pair{"alone", alone_batches}, {"together", together_batches}}) {
    std::printf(
        "batches sent from the input pool (no gather copy at batch time), %s: %llu of %llu (%llu "
        "of them after copying a head that wrapped round the pool), read from the input mirror: "
        "%llu\n",
        phase, static_cast<unsigned long long>(b.pooled),
        static_cast<unsigned long long>(b.pooled + b.gathered),
        static_cast<unsigned long long>(b.spilled), static_cast<unsigned long long>(b.mirrored));
  }
  for (const auto* phase : {&alone, &together, &during_swap}) {
    for (size_t i = 0; i < phase->size(); ++i) {
      for (const auto& [message, count] : (*phase)[i].failures) {
        std::printf("  %s: %llu x %s\n", specs[i].model.c_str(),
                    static_cast<unsigned long long>(count), message.c_str());
      }
    }
  }

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"partitions\": " << Json(manager_of_partitions->reason()) << ", \"mechanism\": "
        << Json(std::string(partition::MechanismName(manager_of_partitions->mechanism())))
        << ", \"input_mirror\": " << Json(input_mirror) << ", \"spill_share\": " << spill_share
        << ", \"duration_s\": " << duration_s << ", \"models\": [";
    for (size_t i = 0; i < specs.size(); ++i) {
      out << (i ? ", " : "") << "{\"model\": " << Json(specs[i].model) << ", \"pct\": "
          << specs[i].pct << ", \"batch\": " << specs[i].batch << ", \"alone\": "
          << ResultJson(alone[i]) << ", \"together\": " << ResultJson(together[i])
          << ", \"during_swap\": " << ResultJson(during_swap[i]) << "}";
    }
    out << "], \"swap\": {\"model\": " << Json(specs[0].model) << ", \"from_pct\": " << specs[0].pct
        << ", \"to_pct\": " << swap_pct << ", \"switched\": " << (first_switch ? "true" : "false")
        << ", \"shadow_start_ms\": " << swap_report.start_ns / 1e6
        << ", \"weights_shared\": " << swap_report.weights_shared
        << ", \"gap_us\": " << (first_switch ? first_switch->swap.gap_ns / 1e3 : 0)
        << ", \"drain_ms\": " << (first_switch ? first_switch->swap.drain_ns / 1e6 : 0)
        << "}, \"pool_batches\": {\"alone\": " << PoolBatchesJson(alone_batches)
        << ", \"together\": " << PoolBatchesJson(together_batches) << "}, \"failed\": " << failed
        << "}\n";
  }

  applier.Shutdown();
  manager.BeginShutdown();
  manager.WaitIdle(10000);
  manager.UnloadAll();
  (*pool)->Stop();
  if (failed > 0 || !first_switch || apply_failed) {
    std::fprintf(stderr, "FAILED: %llu failed request(s)%s%s\n",
                 static_cast<unsigned long long>(failed), first_switch ? "" : ", no lane switch",
                 apply_failed ? ", a plan did not apply" : "");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tessera::server

int main(int argc, char** argv) {
  tessera::DisableMutexDeadlockDetection();
  return tessera::server::Main(argc, argv);
}
