// Batch-time critical path of ExecutorProcess::RunBatch with inputs staged in the input pool ahead
// of the batch vs gathered at batch time, on a real tessera-executor.
//
//   input_pool_bench [model=small_cnn] [requests=16] [batches=200] [threads=1]
//
// Each round runs the same batch (`requests` requests of one row each, random inputs) twice:
// gathered (no staging), then pooled (every request staged first, as the dispatcher does when the
// request is routed). Prints, per batch, the median "prep" time (RunBatch's start to InferBatch
// ready to send: the gather copy or nothing) and of the whole RunBatch, and the median Stage time
// per request (the copy moved off the batch's critical path onto the enqueuing thread).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "executor_process.h"
#include "tessera/common/clock.h"
#include "tessera/repository/model_config.h"

namespace tessera::server {
namespace {

double MedianUs(std::vector<uint64_t> ns) {
  if (ns.empty()) return 0;
  std::sort(ns.begin(), ns.end());
  return static_cast<double>(ns[ns.size() / 2]) / 1000.0;
}

int Main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "small_cnn";
  const int num_requests = argc > 2 ? std::atoi(argv[2]) : 16;
  const int batches = argc > 3 ? std::atoi(argv[3]) : 200;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 1;
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/configs/models/" + model;
  auto config = repository::LoadModelConfigFile(dir + "/config.yaml", model);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  config->max_batch_size = std::max(config->max_batch_size, num_requests);

  ExecutorLaunchOptions options;
  options.binary = TESSERA_EXECUTOR_BINARY;
  options.threads = threads;
  auto process = ExecutorProcess::Start(options, nullptr);
  if (!process.ok()) {
    std::fprintf(stderr, "%s\n", process.status().ToString().c_str());
    return 1;
  }
  const std::string key = model + "/1#0";
  ipc::LoadModel load;
  load.set_instance_key(key);
  load.set_model_name(model);
  load.set_version(1);
  load.set_model_path(dir + "/1/model.onnx");
  load.set_max_batch_size(config->max_batch_size);
  for (const auto& tensor : config->inputs) {
    ipc::TensorSpec* spec = load.add_inputs();
    spec->set_name(tensor.name);
    spec->set_data_type(static_cast<int>(tensor.data_type));
    for (int64_t dim : tensor.dims) spec->add_dims(dim);
  }
  if (Status loaded = (*process)->Load(load, 60000); !loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.ToString().c_str());
    return 1;
  }

  // One row per request; every input fp32 with the config's (static) dims.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<std::vector<std::vector<float>>> data(num_requests);
  std::vector<std::unique_ptr<dispatch::Request>> requests;
  uint64_t request_bytes = 0;
  for (int i = 0; i < num_requests; ++i) {
    auto request = std::make_unique<dispatch::Request>();
    for (const auto& tensor : config->inputs) {
      Shape shape = {1};
      int64_t elements = 1;
      for (int64_t dim : tensor.dims) {
        shape.push_back(dim);
        elements *= dim;
      }
      auto& values = data[i].emplace_back(static_cast<size_t>(elements));
      for (float& v : values) v = dist(rng);
      request->inputs.push_back(TensorView{tensor.name, tensor.data_type, shape, values.data(),
                                           values.size() * sizeof(float)});
      if (i == 0) request_bytes += values.size() * sizeof(float);
    }
    requests.push_back(std::move(request));
  }
  std::vector<const dispatch::Request*> batch;
  for (const auto& request : requests) batch.push_back(request.get());

  std::vector<uint64_t> prep[2], whole[2], stage;
  for (int round = 0; round < batches + 5; ++round) {  // 5 warm-up rounds
    for (int pooled = 0; pooled < 2; ++pooled) {
      for (auto& request : requests) request->staged.reset();
      if (pooled) {
        for (auto& request : requests) {
          const uint64_t start = MonotonicNs();
          request->staged = (*process)->Stage(key, *config, *request);
          if (round >= 5) stage.push_back(MonotonicNs() - start);
        }
      }
      const InputPoolCounters before = (*process)->input_pool_counters();
      const uint64_t start = MonotonicNs();
      auto responses = (*process)->RunBatch(key, *config, batch);
      const uint64_t elapsed = MonotonicNs() - start;
      const InputPoolCounters after = (*process)->input_pool_counters();
      if (!responses.ok()) {
        std::fprintf(stderr, "%s\n", responses.status().ToString().c_str());
        return 1;
      }
      if (pooled && after.batches_pooled != before.batches_pooled + 1) {
        std::fprintf(stderr, "a staged batch was not sent pooled\n");
        return 1;
      }
      if (round < 5) continue;
      prep[pooled].push_back(pooled ? after.prep_ns_pooled - before.prep_ns_pooled
                                    : after.prep_ns_gathered - before.prep_ns_gathered);
      whole[pooled].push_back(elapsed);
    }
  }
  std::printf("model %s, %d requests x 1 row (%llu input bytes each, %llu per batch), %d batches\n",
              model.c_str(), num_requests, static_cast<unsigned long long>(request_bytes),
              static_cast<unsigned long long>(request_bytes * num_requests), batches);
  std::printf(
      "batch prep (RunBatch start -> InferBatch ready), median: gathered %.2f us, pooled "
      "%.2f us, ratio %.1fx\n",
      MedianUs(prep[0]), MedianUs(prep[1]), MedianUs(prep[0]) / MedianUs(prep[1]));
  std::printf("whole RunBatch, median: gathered %.1f us, pooled %.1f us, ratio %.3fx\n",
              MedianUs(whole[0]), MedianUs(whole[1]), MedianUs(whole[0]) / MedianUs(whole[1]));
  std::printf("Stage per request (enqueuing thread, off the batch path), median: %.2f us\n",
              MedianUs(stage));
  (*process)->Stop(5000);
  return 0;
}

}  // namespace
}  // namespace tessera::server

int main(int argc, char** argv) { return tessera::server::Main(argc, argv); }
