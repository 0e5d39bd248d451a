// tessera-engine-bench: latency of the engine's Model::Run on one ONNX file, per batch size, with
// an optional per-layer breakdown. bench/engine/engine_vs_onnxruntime.py runs it next to
// onnxruntime on the same file, threads and inputs' shapes, and prints both with their ratio.
//
// Output: a `# ...` header naming the backend and precision (and, on CUDA, the device), one line
// per batch size, `batch=B median_ms=… p10_ms=… p90_ms=… runs=N`, and with --layers the slowest
// op types and nodes of the last timed batch size.
//
// With --backend cuda a timed Run is what a serving call pays: FP32/INT64 inputs from host memory
// copied to the device, the kernels (a CUDA graph replay from the second Run of a shape on, unless
// --no-cuda-graphs), and the outputs copied back to host memory, ending in a stream sync.
// bench/gpu/engine_vs_torch.py runs it beside PyTorch on the same ONNX files.
//
// --check runs nothing: it tells whether the backend would load the model and plan it for each
// batch size (engine::CheckBackendSupport; for --backend cuda no GPU is needed), printing
// `batch=B check=supported outputs=[..] ...` or the refusal naming every unsupported node.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "tessera/common/float16.h"
#include "tessera/engine/engine.h"

#ifdef TESSERA_BENCH_CUDA
#include <cuda_runtime.h>

#include "engine/cuda/cuda_model.h"
#endif

namespace {

using tessera::DataType;
using tessera::Tensor;
using tessera::TensorView;
namespace engine = tessera::engine;

// Random inputs for one batch size: dim 0 of each input is the batch; other dynamic dims take
// `dynamic_dim`. Integer inputs (token ids, masks) are drawn from [0, int_high).
std::vector<Tensor> MakeInputs(const engine::Model& model, int64_t batch, int64_t dynamic_dim,
                               int64_t int_high, std::mt19937* rng) {
  std::vector<Tensor> inputs;
  for (const engine::TensorInfo& info : model.inputs()) {
    Tensor t;
    t.name = info.name;
    t.dtype = info.dtype;
    t.shape = info.shape;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0) t.shape[d] = d == 0 ? batch : dynamic_dim;
    }
    if (!t.shape.empty() && info.shape[0] < 0) t.shape[0] = batch;
    const int64_t count = tessera::ElementCount(t.shape);
    t.bytes.resize(static_cast<size_t>(count) * tessera::DataTypeByteSize(t.dtype));
    if (t.dtype == DataType::kFp32) {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      auto* p = reinterpret_cast<float*>(t.bytes.data());
      for (int64_t i = 0; i < count; ++i) p[i] = dist(*rng);
    } else if (t.dtype == DataType::kFp16 || t.dtype == DataType::kBf16) {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      auto* p = reinterpret_cast<uint16_t*>(t.bytes.data());
      for (int64_t i = 0; i < count; ++i) {
        p[i] = t.dtype == DataType::kFp16 ? tessera::FloatToFp16(dist(*rng))
                                          : tessera::FloatToBf16(dist(*rng));
      }
    } else if (t.dtype == DataType::kInt64) {
      std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(0, int_high - 1));
      auto* p = reinterpret_cast<int64_t*>(t.bytes.data());
      for (int64_t i = 0; i < count; ++i) p[i] = dist(*rng);
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// "NVIDIA H100 80GB HBM3 (device 0)", or why there is none. Only in builds with CUDA.
std::string CudaDeviceName() {
#ifdef TESSERA_BENCH_CUDA
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return "no usable CUDA device";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "no usable CUDA device";
  return std::string(prop.name) + " (device " + std::to_string(device) + ")";
#else
  return "this build has no CUDA";
#endif
}

// --check: the inputs' shapes come from the model as the CPU loads it (which also checks every
// node against the CPU kernels); dynamic dims as MakeInputs fills them.
int CheckOnly(const std::string& path, engine::Backend backend, const std::vector<int64_t>& batches,
              int64_t dynamic_dim) {
  auto cpu = engine::LoadOnnxModel(path, engine::ModelOptions{});
  if (!cpu.ok()) {
    std::fprintf(stderr, "tessera-engine-bench: %s\n", cpu.status().ToString().c_str());
    return 1;
  }
  int failures = 0;
  for (int64_t batch : batches) {
    std::vector<tessera::Shape> shapes, outputs;
    for (const engine::TensorInfo& info : (*cpu)->inputs()) {
      tessera::Shape shape = info.shape;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] < 0) shape[d] = d == 0 ? batch : dynamic_dim;
      }
      shapes.push_back(shape);
    }
    const tessera::Status status = engine::CheckBackendSupport(path, backend, &shapes, &outputs);
    if (!status.ok()) {
      std::printf("batch=%ld check=UNSUPPORTED %s\n", static_cast<long>(batch),
                  status.ToString().c_str());
      ++failures;
      continue;
    }
    std::string shown;
    for (const tessera::Shape& shape : outputs) shown += " " + tessera::ShapeToString(shape);
    std::printf("batch=%ld check=supported outputs=%s\n", static_cast<long>(batch),
                outputs.empty() ? " (not planned by this backend)" : shown.c_str());
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  engine::EnsurePassiveOpenMpWait(argv);
  CLI::App app{"tessera-engine-bench: latency of the engine's Model::Run on one ONNX file"};
  std::string model_path;
  std::vector<int64_t> batches = {1, 8};
  // Warm-up covers the CPU model's first Runs with a shape, which plan memory (1) and time each
  // node alone and on the pool (2 x NodeParallelism::kSamples).
  int threads = 1, warmup = 10, iterations = 20;
  int64_t dynamic_dim = 1, int_high = 2;
  bool layers = false, no_onednn = false, no_node_tuning = false, no_cuda_graphs = false;
  bool check = false;
  std::string backend = "cpu", precision = "fp32";
  app.add_option("--model", model_path, "ONNX model file")->required();
  app.add_option("--batches", batches, "Batch sizes (comma-separated)")->delimiter(',');
  app.add_option("--threads", threads, "Engine threads")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Untimed runs per batch size")->check(CLI::NonNegativeNumber);
  app.add_option("--iterations", iterations, "Timed runs per batch size")
      ->check(CLI::PositiveNumber);
  app.add_option("--dynamic-dim", dynamic_dim, "Value of dynamic dims other than the batch");
  app.add_option("--int-high", int_high, "Integer inputs are drawn from [0, int-high)");
  app.add_flag("--layers", layers,
               "Print the per-layer breakdown of the last batch size (per node, the median over "
               "--iterations more Runs)");
  int top_nodes = 10;
  app.add_option("--top-nodes", top_nodes, "With --layers, how many of the slowest nodes to list")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-onednn", no_onednn, "Use only the engine's own kernels (CPU)");
  app.add_flag("--no-node-tuning", no_node_tuning,
               "CPU: every node on every thread (no per-node choice of pool or alone)");
  app.add_option("--backend", backend, "Engine backend")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", precision,
                 "Weights/activations precision (fp16: CUDA only; the interface stays FP32)")
      ->check(CLI::IsMember({"fp32", "fp16"}));
  app.add_flag("--no-cuda-graphs", no_cuda_graphs,
               "CUDA: launch kernel by kernel instead of replaying a captured graph");
  app.add_flag("--check", check,
               "Only check that the backend loads and plans the model at each batch size "
               "(no GPU needed for cuda); runs nothing");
  CLI11_PARSE(app, argc, argv);

  engine::ModelOptions options;
  options.num_threads = threads;
  options.onednn = !no_onednn;
  options.tune_node_parallelism = !no_node_tuning;
  options.backend = backend == "cuda" ? engine::Backend::kCuda : engine::Backend::kCpu;
  options.precision = precision == "fp16" ? engine::Precision::kFp16 : engine::Precision::kFp32;
  options.cuda_graphs = !no_cuda_graphs;
  if (options.backend == engine::Backend::kCpu && options.precision != engine::Precision::kFp32) {
    std::fprintf(stderr, "tessera-engine-bench: --precision fp16 needs --backend cuda\n");
    return 2;
  }
  if (check) return CheckOnly(model_path, options.backend, batches, dynamic_dim);
  auto model = engine::LoadOnnxModel(model_path, options);
  if (!model.ok()) {
    std::fprintf(stderr, "tessera-engine-bench: %s\n", model.status().ToString().c_str());
    return 1;
  }
  if (options.backend == engine::Backend::kCuda) {
    std::printf("# backend=cuda precision=%s cuda_graphs=%s device=%s\n", precision.c_str(),
                no_cuda_graphs ? "off" : "on", CudaDeviceName().c_str());
    std::printf("# timed Run = host->device input copies + kernels + device->host output copies"
                " + stream sync\n");
  } else {
#ifdef TESSERA_BENCH_TCMALLOC
    const char* allocator = "tcmalloc";
#else
    const char* allocator = "glibc";
#endif
    std::printf("# backend=cpu threads=%d onednn=%s node_tuning=%s malloc=%s\n", threads,
                no_onednn ? "off" : "on", no_node_tuning ? "off" : "on", allocator);
  }
  std::fflush(stdout);
  std::mt19937 rng(1234);
  std::vector<engine::LayerTiming> last_timings;
  for (int64_t batch : batches) {
    std::vector<Tensor> inputs = MakeInputs(**model, batch, dynamic_dim, int_high, &rng);
    std::vector<TensorView> views;
    for (Tensor& t : inputs) views.push_back(t.View());
    std::vector<Tensor> outputs;
    for (int i = 0; i < warmup; ++i) {
      auto status = (*model)->Run(views, &outputs);
      if (!status.ok()) {
        std::fprintf(stderr, "tessera-engine-bench: batch %ld: %s\n", static_cast<long>(batch),
                     std::string(status.message()).c_str());
        return 1;
      }
    }
    std::vector<double> ms;
    for (int i = 0; i < iterations; ++i) {
      auto start = std::chrono::steady_clock::now();
      auto status = (*model)->Run(views, &outputs);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             start)
                       .count());
      if (!status.ok()) return 1;
    }
    std::printf("batch=%ld median_ms=%.3f p10_ms=%.3f p90_ms=%.3f runs=%d\n",
                static_cast<long>(batch), Percentile(ms, 0.5), Percentile(ms, 0.1),
                Percentile(ms, 0.9), iterations);
#ifdef TESSERA_BENCH_CUDA
    // A shape whose capture failed runs kernel by kernel: say so, it changes what was timed.
    if (options.backend == engine::Backend::kCuda && options.cuda_graphs) {
      auto captured = engine::CudaGraphsCaptured(**model);
      std::printf("# cuda graphs captured: %s\n",
                  captured.ok() ? std::to_string(*captured).c_str()
                                : std::string(captured.status().message()).c_str());
    }
#endif
    std::fflush(stdout);  // a later batch size may fail; the lines so far still reach the reader
    if (layers) {
      // Per node, the median over `iterations` timed Runs: one Run's figures are too noisy on a
      // shared machine to compare nodes that take tens of microseconds.
      std::vector<std::vector<uint64_t>> per_node;
      std::vector<engine::LayerTiming> run;
      for (int i = 0; i < iterations; ++i) {
        run.clear();
        if (!(*model)->RunTimed(views, &outputs, &run).ok()) return 1;
        per_node.resize(run.size());
        for (size_t n = 0; n < run.size(); ++n) per_node[n].push_back(run[n].ns);
      }
      for (size_t n = 0; n < run.size(); ++n) {
        std::vector<uint64_t>& ns = per_node[n];
        std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
        run[n].ns = ns[ns.size() / 2];
      }
      last_timings = std::move(run);
    }
  }
  if (layers && !last_timings.empty()) {
    std::map<std::string, uint64_t> by_op;
    uint64_t total = 0;
    for (const auto& t : last_timings) {
      by_op[t.op] += t.ns;
      total += t.ns;
    }
    std::vector<std::pair<uint64_t, std::string>> sorted;
    for (const auto& [op, ns] : by_op) sorted.emplace_back(ns, op);
    std::sort(sorted.rbegin(), sorted.rend());
    std::printf("layers: %zu nodes, %.3f ms in kernels\n", last_timings.size(), total / 1e6);
    for (const auto& [ns, op] : sorted) {
      std::printf("  op %-24s %8.3f ms %5.1f%%\n", op.c_str(), ns / 1e6, 100.0 * ns / total);
    }
    std::sort(last_timings.begin(), last_timings.end(),
              [](const auto& a, const auto& b) { return a.ns > b.ns; });
    for (size_t i = 0; i < std::min<size_t>(top_nodes, last_timings.size()); ++i) {
      std::printf("  node %-40s %-12s %8.3f ms\n", last_timings[i].node.c_str(),
                  last_timings[i].op.c_str(), last_timings[i].ns / 1e6);
    }
  }
  return 0;
}
