// tessera-profile: measures latency profiles L(b, p) of a repository's models on this machine's CPU
// and writes a profile folder (device.yaml + <model>.yaml) for the scheduler
// (docs/profile-format.md, "Measuring on CPU: tessera-profile").
//
//   tessera-profile --model-repository configs/models --out profiles/cpu-2core
//       [--models mlp,small_cnn] [--device-name NAME] [--partitions 50,100] [--batches 1,2,4,8]
//       [--warmup 5] [--iterations 30] [--rounds 1] [--note TEXT]
//
// Exit status: 0 written, 1 a measurement failed (engine error), 2 bad flags or inputs (unknown
// model, missing repository, unusable config).
#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tessera/engine/engine.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "profiler.h"
#include "tessera/repository/repository.h"

namespace tessera::profiler {
namespace {

constexpr char kTool[] = "tessera-profile";

int Fail(int code, const Status& status) {
  std::cerr << kTool << ": " << status.message() << "\n";
  return code;
}

std::string TodayUtc() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &tm);
  return text;
}

// The entries to profile: the named ones (each must exist and be servable) or every model.
StatusOr<std::vector<repository::ModelEntry>> SelectModels(const std::string& root,
                                                           const std::string& names) {
  TESSERA_ASSIGN_OR_RETURN(repository::RepositorySnapshot snapshot,
                           repository::ScanRepository(root));
  std::vector<repository::ModelEntry> entries;
  if (names.empty()) {
    entries = snapshot.models;
    if (entries.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("model repository ", root, " has no models"));
    }
  } else {
    for (absl::string_view part : absl::StrSplit(names, ',', absl::SkipEmpty())) {
      const std::string name(part);
      const repository::ModelEntry* entry = snapshot.Find(name);
      if (entry == nullptr) {
        std::vector<std::string> known;
        for (const auto& m : snapshot.models) known.push_back(m.name);
        return absl::NotFoundError(absl::StrCat("no model '", name, "' in repository ", root,
                                                " (it has: ", absl::StrJoin(known, ", "), ")"));
      }
      entries.push_back(*entry);
    }
  }
  for (const auto& entry : entries) {
    if (Status s = repository::CheckServable(entry); !s.ok()) {
      return Status(s.code(), absl::StrCat("model '", entry.name, "': ", s.message()));
    }
  }
  return entries;
}

void PrintTable(const MeasuredModel& m) {
  const auto& t = m.profile.table();
  std::cout << m.profile.model() << ": memory " << m.profile.memory_mb() << " MB, "
            << m.adjusted_cells << " cell(s) adjusted; latency ms (rows: partition % / cores, "
            << "columns: batch)\n";
  std::cout << absl::StrFormat("  %-12s", "p% / cores");
  for (int b : t.batches) std::cout << absl::StrFormat(" %9d", b);
  std::cout << "\n";
  for (size_t i = 0; i < t.partitions_pct.size(); ++i) {
    std::cout << absl::StrFormat("  %3d%% / %-5d", t.partitions_pct[i], m.cores_per_partition[i]);
    for (double v : t.latency_ms[i]) std::cout << absl::StrFormat(" %9.4f", v);
    std::cout << "\n";
  }
}

int Run(int argc, char** argv) {
  CLI::App app{
      "tessera-profile: measures latency profiles L(b, p) of models on this machine's CPU "
      "(partition p % = max(1, round(p/100 n)) pinned cores of the n this process may use) and "
      "writes a profile folder (docs/profile-format.md)"};
  std::string repository_root, out_dir, models, device_name, partitions_text, batches_text, note;
  ProfileOptions options;
  app.add_option("--model-repository", repository_root, "Model repository root")->required();
  app.add_option("--out", out_dir, "Profile folder to write (device.yaml + <model>.yaml)")
      ->required();
  app.add_option("--models", models, "Comma-separated models to profile (default: all)");
  app.add_option("--device-name", device_name, "Device kind name (default: cpu-<n>core)");
  app.add_option("--partitions", partitions_text,
                 "Comma-separated partitions in % (1..100, must contain 100; default: one per "
                 "distinct core count of 20,40,50,60,80,100)");
  app.add_option("--batches", batches_text,
                 "Comma-separated batch sizes (must contain 1; those above a model's "
                 "max_batch_size are skipped; default: powers of two up to max_batch_size, and "
                 "max_batch_size)");
  app.add_option("--warmup", options.warmup, "Untimed runs before each measurement (default 5)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iterations", options.iterations,
                 "Timed runs per (partition, batch); latency = their median (default 30)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", options.rounds,
                 "Sweeps over the whole table; a cell is the median of rounds x iterations runs "
                 "(default 1; more resists bursts of load on a shared machine)")
      ->check(CLI::PositiveNumber);
  app.add_option("--note", note, "Free text appended to every model file's note:");
  CLI11_PARSE(app, argc, argv);

  if (!partitions_text.empty()) {
    auto parsed = ParseIntList(partitions_text, "--partitions", 1, 100, 100);
    if (!parsed.ok()) return Fail(2, parsed.status());
    options.partitions_pct = *parsed;
  }
  if (!batches_text.empty()) {
    auto parsed = ParseIntList(batches_text, "--batches", 1, 1024, 1);
    if (!parsed.ok()) return Fail(2, parsed.status());
    options.batches = *parsed;
  }
  auto cpus = AllowedCpus();
  if (!cpus.ok()) return Fail(1, cpus.status());
  options.cpus = *cpus;
  const int n = static_cast<int>(cpus->size());
  options.device_name = device_name.empty() ? absl::StrCat("cpu-", n, "core") : device_name;

  auto entries = SelectModels(repository_root, models);
  if (!entries.ok()) return Fail(2, entries.status());

  const std::string host = HostName();
  const std::string date = TodayUtc();
  std::vector<MeasuredModel> measured;
  for (const repository::ModelEntry& entry : *entries) {
    std::cout << "profiling " << entry.name << " on " << n << " core(s)..." << std::endl;
    auto m = ProfileModel(entry, options);
    if (!m.ok()) {
      return Fail(m.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1, m.status());
    }
    PrintTable(*m);
    measured.push_back(std::move(*m));
  }

  scheduler::DeviceInfo device;
  device.name = options.device_name;
  device.memory_mb = PhysicalMemoryMb();
  WriteOptions write;
  write.model_source = absl::StrCat(kTool, " on ", host, ", ", date, ", median of ",
                                    options.rounds * options.iterations, " runs");
  const std::string cpu_model = CpuModelName();
  write.device_source = absl::StrCat(kTool, " on ", host, ", ", date, ", ", n, " core(s) (CPUs ",
                                     absl::StrJoin(*cpus, ","),
                                     cpu_model.empty() ? "" : absl::StrCat("; ", cpu_model),
                                     "), memory_mb = physical RAM (MB = 2^20 bytes)");
  write.extra_note = note;
  if (Status s = WriteProfileDirectory(out_dir, device, measured, write); !s.ok()) {
    return Fail(1, s);
  }
  std::cout << "wrote " << out_dir << " (" << measured.size() << " model(s), device " << device.name
            << ")\n";
  return 0;
}

}  // namespace
}  // namespace tessera::profiler

int main(int argc, char** argv) {
  tessera::engine::EnsurePassiveOpenMpWait(argv);
  return tessera::profiler::Run(argc, argv);
}
