#include "profiler.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tessera/engine/engine.h"
#include "tessera/repository/model_completion.h"
#include "yaml_text.h"

namespace tessera::profiler {
namespace {

using scheduler::ModelProfile;

constexpr double kStepsPerMs = 1e4;  // latencies are written in steps of 0.1 µs
constexpr double kResolutionMs = 1 / kStepsPerMs;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Fills `bytes` with values a model can run on: floats in [-1, 1), integers in [0, 4) (small enough
// to be valid indices for gather-like ops), bools 0/1.
Status FillRandom(DataType dtype, std::mt19937* rng, std::vector<std::byte>* bytes) {
  const size_t size = DataTypeByteSize(dtype);
  if (size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("data type ",
                                                   std::string(DataTypeToConfigName(dtype)),
                                                   " cannot be filled with random values"));
  }
  const size_t count = bytes->size() / size;
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 3);
  std::byte* out = bytes->data();
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DataType::kFp32: {
        const float v = real(*rng);
        std::memcpy(out + i * 4, &v, 4);
        break;
      }
      case DataType::kFp64: {
        const double v = real(*rng);
        std::memcpy(out + i * 8, &v, 8);
        break;
      }
      case DataType::kBf16: {
        const float v = real(*rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t half = static_cast<uint16_t>(bits >> 16);
        std::memcpy(out + i * 2, &half, 2);
        break;
      }
      case DataType::kFp16: {
        // ±[0.5, 1): exponent 14, random mantissa and sign.
        const uint16_t half = static_cast<uint16_t>(0x3800 | ((*rng)() & 0x83FF));
        std::memcpy(out + i * 2, &half, 2);
        break;
      }
      case DataType::kBool:
        out[i] = static_cast<std::byte>(small(*rng) & 1);
        break;
      default: {
        // Integers of any width, little-endian: the low byte holds the value, the rest stay 0.
        std::memset(out + i * size, 0, size);
        out[i * size] = static_cast<std::byte>(small(*rng));
        break;
      }
    }
  }
  return absl::OkStatus();
}

// Random inputs for one batch of `batch` requests, shaped as the config declares.
StatusOr<std::vector<Tensor>> MakeInputs(const repository::ModelConfig& config, int batch,
                                         std::mt19937* rng) {
  std::vector<Tensor> inputs;
  for (const repository::TensorConfig& in : config.inputs) {
    Tensor t;
    t.name = in.name;
    t.dtype = in.data_type;
    if (config.max_batch_size > 0) t.shape.push_back(batch);
    const Shape& dims = repository::ModelDims(in);  // it runs the engine directly
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("model '", config.name, "': input '", in.name,
                         "' has a variable dim (dims[", d, "] = -1 in ", ShapeToString(dims),
                         "); tessera-profile needs a fixed shape: set that dim in config.yaml"));
      }
      t.shape.push_back(dims[d]);
    }
    const size_t size = DataTypeByteSize(in.data_type);
    if (size == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model '", config.name, "': input '", in.name, "' has data type ",
          std::string(DataTypeToConfigName(in.data_type)), ", which tessera-profile cannot fill"));
    }
    std::optional<uint64_t> bytes = DenseByteSize(t.shape, size);
    if (!bytes) {
      return absl::InvalidArgumentError(absl::StrCat("model '", config.name, "': input '", in.name,
                                                     "' of shape ", ShapeToString(t.shape),
                                                     " has more than 2^64 bytes"));
    }
    t.bytes.resize(*bytes);
    TESSERA_RETURN_IF_ERROR(FillRandom(in.data_type, rng, &t.bytes));
    inputs.push_back(std::move(t));
  }
  return inputs;
}

Status WithContext(const Status& status, const std::string& context) {
  return Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

Status WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<ScopedAffinity>> ScopedAffinity::Create(const std::vector<int>& cpus) {
  auto pin = std::unique_ptr<ScopedAffinity>(new ScopedAffinity());
  if (pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), &pin->saved_) != 0) {
    return absl::InternalError("cannot read the calling thread's CPU affinity");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (int err = pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), &set); err != 0) {
    return absl::InternalError(absl::StrCat("cannot pin the calling thread to CPUs ",
                                            absl::StrJoin(cpus, ","), ": ", std::strerror(err)));
  }
  pin->active_ = true;
  return pin;
}

ScopedAffinity::ScopedAffinity() { CPU_ZERO(&saved_); }

ScopedAffinity::~ScopedAffinity() {
  if (active_) pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), &saved_);
}

StatusOr<std::vector<int>> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return absl::InternalError(absl::StrCat("sched_getaffinity failed: ", std::strerror(errno)));
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  if (cpus.empty()) return absl::InternalError("sched_getaffinity returned no CPUs");
  return cpus;
}

int CoresForPartition(int partition_pct, int num_cores) {
  // round(p·n/100) with halves up, in integers so 50 % of 3 cores is 2, not 1 by a float error.
  return std::max(1, (partition_pct * num_cores + 50) / 100);
}

std::vector<int> DefaultPartitions(int num_cores) {
  std::vector<int> chosen;
  int previous_cores = -1;
  // Descending, keeping the first (largest) partition of each core count.
  for (auto it = std::rbegin(kCandidatePartitions); it != std::rend(kCandidatePartitions); ++it) {
    const int cores = CoresForPartition(*it, num_cores);
    if (cores == previous_cores) continue;
    chosen.push_back(*it);
    previous_cores = cores;
  }
  std::reverse(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<int> DefaultBatches(int max_batch_size) {
  std::vector<int> batches;
  for (int b = 1; b <= std::max(1, max_batch_size); b *= 2) batches.push_back(b);
  if (max_batch_size > batches.back()) batches.push_back(max_batch_size);
  return batches;
}

StatusOr<std::vector<int>> ParseIntList(const std::string& text, const std::string& flag,
                                        int min_value, int max_value, int required) {
  std::vector<int> values;
  std::set<int> seen;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::string item(absl::StripAsciiWhitespace(part));
    int value = 0;
    if (!absl::SimpleAtoi(item, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", text, "': '", item, "' is not an integer"));
    }
    if (value < min_value || value > max_value) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", text, "': ", value, " is outside ", min_value, "..", max_value));
    }
    if (!seen.insert(value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", text, "': ", value, " is listed twice"));
    }
    values.push_back(value);
  }
  if (!seen.count(required)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", text, "': must contain ", required, " (every profile needs it)"));
  }
  std::sort(values.begin(), values.end());
  return values;
}

int MakeMonotone(ModelProfile::Table* table) {
  auto& rows = table->latency_ms;
  const std::vector<std::vector<double>> before = rows;
  for (size_t i = 1; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) rows[i][j] = std::min(rows[i][j], rows[i - 1][j]);
  }
  for (auto& row : rows) {
    for (size_t j = 1; j < row.size(); ++j) row[j] = std::max(row[j], row[j - 1]);
  }
  int changed = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) changed += rows[i][j] != before[i][j] ? 1 : 0;
  }
  return changed;
}

StatusOr<MeasuredModel> ProfileModel(const repository::ModelEntry& entry,
                                     const ProfileOptions& options) {
  TESSERA_RETURN_IF_ERROR(repository::CheckServable(entry));
  const std::string& name = entry.name;
  const repository::ModelVersion* version = entry.FindVersion(entry.selected_versions.back());
  if (version == nullptr) {
    return absl::InternalError(absl::StrCat("model '", name, "': selected version missing"));
  }
  // Profiled with the config the server would serve it with (completed from the model file when
  // it leaves out inputs or outputs).
  TESSERA_ASSIGN_OR_RETURN(const repository::ModelConfig config,
                           repository::CompleteFromModelFile(*entry.config, version->model_path));
  if (config.platform != "onnx") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", name, "': platform '", config.platform, "' is not supported (onnx only)"));
  }
  if (options.device_name.empty()) {
    return absl::InvalidArgumentError("profile options: device_name is empty");
  }
  if (options.warmup < 0 || options.iterations < 1 || options.rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile options: warmup (", options.warmup, ") must be >= 0, iterations (",
                     options.iterations, ") and rounds (", options.rounds, ") >= 1"));
  }
  std::vector<int> cpus = options.cpus;
  if (cpus.empty()) {
    TESSERA_ASSIGN_OR_RETURN(cpus, AllowedCpus());
  }
  const int num_cores = static_cast<int>(cpus.size());
  const std::vector<int> partitions =
      options.partitions_pct.empty() ? DefaultPartitions(num_cores) : options.partitions_pct;
  if (partitions.empty() || partitions.back() != 100) {
    return absl::InvalidArgumentError("profile options: partitions must end with 100");
  }
  const int max_batch = std::max(1, config.max_batch_size);
  std::vector<int> batches;
  for (int b : options.batches.empty() ? DefaultBatches(config.max_batch_size) : options.batches) {
    if (b <= max_batch) batches.push_back(b);
  }
  if (batches.empty() || batches.front() != 1) {
    return absl::InvalidArgumentError("profile options: batches must contain 1");
  }

  std::mt19937 rng(12345);
  // Refuse a config the inputs cannot be built for before spending time on measurements.
  TESSERA_RETURN_IF_ERROR(MakeInputs(config, 1, &rng).status());

  ModelProfile::Table raw;
  raw.partitions_pct = partitions;
  raw.batches = batches;
  std::vector<int> cores_per_partition;
  double memory_bytes = 0;
  for (int p : partitions) cores_per_partition.push_back(CoresForPartition(p, num_cores));
  // samples[i][j]: every timed run of batches[j] on partitions[i], over all rounds.
  std::vector<std::vector<std::vector<double>>> samples(
      partitions.size(), std::vector<std::vector<double>>(batches.size()));
  // Rounds sweep the whole table one after another, so a burst of load from other processes
  // inflates one round's share of a cell's samples rather than the whole cell.
  for (int round = 0; round < options.rounds; ++round) {
    for (size_t i = 0; i < partitions.size(); ++i) {
      const int cores = cores_per_partition[i];
      const std::string where = absl::StrCat("model '", name, "' on ", cores, " of ", num_cores,
                                             " cores (partition ", partitions[i], " %)");
      // Declared before the model so the model (and its pool's threads) goes first.
      TESSERA_ASSIGN_OR_RETURN(
          auto pin, ScopedAffinity::Create(std::vector<int>(cpus.begin(), cpus.begin() + cores)));
      engine::ModelOptions model_options;
      model_options.num_threads = cores;
      auto model = engine::LoadOnnxModel(version->model_path, model_options);
      if (!model.ok()) return WithContext(model.status(), where);

      std::vector<Tensor> outputs;
      for (size_t j = 0; j < batches.size(); ++j) {
        TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeInputs(config, batches[j], &rng));
        std::vector<TensorView> views;
        for (Tensor& t : inputs) views.push_back(t.View());
        const std::string at = absl::StrCat(where, ", batch ", batches[j]);
        for (int k = 0; k < options.warmup; ++k) {
          if (Status s = (*model)->Run(views, &outputs); !s.ok()) return WithContext(s, at);
        }
        for (int k = 0; k < options.iterations; ++k) {
          const auto start = std::chrono::steady_clock::now();
          Status s = (*model)->Run(views, &outputs);
          const auto end = std::chrono::steady_clock::now();
          if (!s.ok()) return WithContext(s, at);
          samples[i][j].push_back(std::chrono::duration<double, std::milli>(end - start).count());
        }
      }

      if (round == 0 && partitions[i] == 100) {
        // Weights plus the activation arena at the largest batch: what one instance holds.
        auto plan = (*model)->PlanMemory(max_batch);
        if (!plan.ok()) return WithContext(plan.status(), absl::StrCat(where, ", memory plan"));
        memory_bytes = static_cast<double>((*model)->weight_bytes() + plan->arena_bytes);
      }
    }
  }
  for (const auto& partition_samples : samples) {
    std::vector<double> row;
    for (const auto& cell : partition_samples) {
      // 0.1 µs is below what a timed Run resolves; rounding keeps the files readable. (Divided
      // by the power of ten, not multiplied by its inexact inverse, so the value prints short.)
      row.push_back(std::max(kResolutionMs, std::round(Median(cell) * kStepsPerMs) / kStepsPerMs));
    }
    raw.latency_ms.push_back(std::move(row));
  }

  ModelProfile::Table table = raw;
  const int adjusted = MakeMonotone(&table);
  // Three decimals of a MB (1 KB) is as precise as the figure is meaningful.
  const double memory_mb = std::round(memory_bytes / (1024.0 * 1024.0) * 1000.0) / 1000.0;
  TESSERA_ASSIGN_OR_RETURN(ModelProfile profile,
                           ModelProfile::Create(name, options.device_name, std::move(table),
                                                memory_mb, {}, /*synthetic=*/false));
  return MeasuredModel{std::move(profile),  std::move(raw),     adjusted,       num_cores,
                       cores_per_partition, options.iterations, options.warmup, options.rounds};
}

std::string MeasuredProfileYaml(const MeasuredModel& m, const std::string& source,
                                const std::string& extra_note) {
  const auto& t = m.profile.table();
  std::vector<std::string> splits;
  for (size_t i = 0; i < t.partitions_pct.size(); ++i) {
    splits.push_back(absl::StrCat(t.partitions_pct[i], " % = ", m.cores_per_partition[i]));
  }
  std::string note = absl::StrCat(
      "CPU latency of Run (inputs ready, no batching or queueing), median of ",
      m.rounds * m.iterations, " timed runs per cell (", m.rounds, " round(s) over the table of ",
      m.iterations, " runs, each after ", m.warmup, " warm-up runs); partition = cores of ",
      m.num_cores, " with that many engine threads pinned to them (", absl::StrJoin(splits, ", "),
      "). Cleanup to be monotone (never slower with more cores, never faster with a larger "
      "batch) adjusted ",
      m.adjusted_cells, " of ", t.partitions_pct.size() * t.batches.size(),
      " cells; the raw medians are in the comment at the end. memory_mb = weights + activation "
      "arena at batch ",
      t.batches.back(), ", MB = 2^20 bytes.");
  if (!extra_note.empty()) absl::StrAppend(&note, " ", extra_note);
  std::string out = scheduler::ProfileToYaml(m.profile, source);
  absl::StrAppend(&out, "note: ", scheduler::QuoteYamlString(note), "\n");
  out += "# raw medians (ms) before cleanup, one line per partition:\n";
  for (size_t i = 0; i < m.raw.latency_ms.size(); ++i) {
    std::vector<std::string> cells;
    for (double v : m.raw.latency_ms[i]) cells.push_back(scheduler::FormatYamlNumber(v));
    absl::StrAppend(&out, "#   ", m.raw.partitions_pct[i], " %: [", absl::StrJoin(cells, ", "),
                    "]\n");
  }
  return out;
}

double PhysicalMemoryMb() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return std::floor(static_cast<double>(pages) * static_cast<double>(page_size) /
                    (1024.0 * 1024.0));
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "";
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

Status WriteProfileDirectory(const std::filesystem::path& dir, const scheduler::DeviceInfo& device,
                             const std::vector<MeasuredModel>& models,
                             const WriteOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  }
  TESSERA_RETURN_IF_ERROR(
      WriteText(dir / "device.yaml", scheduler::DeviceToYaml(device, options.device_source)));
  for (const MeasuredModel& m : models) {
    TESSERA_RETURN_IF_ERROR(
        WriteText(dir / (m.profile.model() + ".yaml"),
                  MeasuredProfileYaml(m, options.model_source, options.extra_note)));
  }
  return absl::OkStatus();
}

}  // namespace tessera::profiler
