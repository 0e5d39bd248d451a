// The measuring side of tessera-profile: latency profiles L(b, p) of a model on this machine's CPU
// (docs/profile-format.md, "Measuring on CPU: tessera-profile").
//
// On CPU a partition (gpulet) of p % of the device is max(1, round(p/100 · n)) cores of the n cores
// the process may use (sched_getaffinity), with that many engine threads pinned to those cores.
// ProfileModel loads the model once per partition with num_threads = the partition's cores while
// the calling thread is pinned to those cores (the engine's worker threads are created at load and
// inherit the affinity), times Run on random inputs for each batch, and restores the caller's
// affinity afterwards. Latency is the median of the timed runs after warm-up (over all rounds).
//
// Measurements on a busy CPU are noisy; MakeMonotone turns the raw medians into a table the
// scheduler accepts (never slower with more cores, never faster with a larger batch) and counts the
// cells it changed, which the written file reports in its `note:`.
//
// Thread-safety: the pure functions are safe anywhere. ProfileModel changes the calling thread's
// CPU affinity while it runs (restored before it returns), so call it from one thread at a time
// and do not rely on that thread's affinity meanwhile.
#pragma once

#include <sched.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/repository/repository.h"
#include "tessera/scheduler/profile.h"

namespace tessera::profiler {

// The partitions a default profile measures (gpulet-style splits).
inline constexpr int kCandidatePartitions[] = {20, 40, 50, 60, 80, 100};

// The CPU ids this process may run on (sched_getaffinity), ascending. INTERNAL if the call fails.
StatusOr<std::vector<int>> AllowedCpus();

// Pins the calling thread to `cpus` for the object's lifetime and restores the thread's previous
// mask in the destructor (destroy it on the thread that created it). Threads the pinned thread
// creates meanwhile inherit the mask (Linux), which is how the engine's pool workers, created at
// LoadOnnxModel, end up on a partition's cores. INTERNAL when the mask cannot be read or set
// (e.g. a CPU outside the process's allowed set).
class ScopedAffinity {
 public:
  static StatusOr<std::unique_ptr<ScopedAffinity>> Create(const std::vector<int>& cpus);
  ~ScopedAffinity();
  ScopedAffinity(const ScopedAffinity&) = delete;
  ScopedAffinity& operator=(const ScopedAffinity&) = delete;

 private:
  ScopedAffinity();
  cpu_set_t saved_;
  bool active_ = false;
};

// Cores of a partition of `partition_pct` % of `num_cores` cores: max(1, round(p/100 · n)),
// halves rounded up. partition_pct in 1..100, num_cores ≥ 1.
int CoresForPartition(int partition_pct, int num_cores);

// Default partitions for `num_cores` cores: one per distinct core count among
// kCandidatePartitions, ascending, always ending with 100. Of the candidates giving the same core
// count the largest is kept, so a partition between two profiled ones is interpolated from the one
// with fewer cores up: the estimate is never faster than the cores it would really get. E.g.
// n=1 → {100}, n=2 → {60, 100}, n=4 → {20, 60, 80, 100}, n=8 and n=16 → all six.
std::vector<int> DefaultPartitions(int num_cores);

// Default batches for a model: powers of two up to max_batch_size plus max_batch_size itself
// ({1, 2, 4, 8, 12} for 12); {1} when the model does not batch (max_batch_size 0).
std::vector<int> DefaultBatches(int max_batch_size);

// Parses a comma-separated list of integers ("50,100") for --partitions / --batches: each in
// [min_value, max_value], no duplicates, must contain `required` (100 for partitions, 1 for
// batches). Returned ascending. INVALID_ARGUMENT naming `flag` and the bad entry.
StatusOr<std::vector<int>> ParseIntList(const std::string& text, const std::string& flag,
                                        int min_value, int max_value, int required);

// Makes `table` acceptable as a profile, in place: first along the partition, for each batch,
// L(b, larger p) = min(itself, L(b, smaller p)); then along the batch, for each partition,
// L(larger b, p) = max(itself, L(smaller b, p)). The second step keeps the first's property.
// Returns how many cells differ from their input value. `table` must be rectangular (latency_ms has
// one row per partition and one value per batch) with partitions and batches ascending.
int MakeMonotone(scheduler::ModelProfile::Table* table);

struct ProfileOptions {
  std::string device_name;          // the profile's `device:`; required
  std::vector<int> cpus;            // the n cores partitions are cut from; empty = AllowedCpus()
  std::vector<int> partitions_pct;  // empty = DefaultPartitions(n); must contain 100
  // Empty = DefaultBatches(max_batch_size). Batches above the model's max batch (1 for a model
  // that does not batch) are skipped; must contain 1.
  std::vector<int> batches;
  int warmup = 5;       // untimed runs before each (partition, batch) measurement, ≥ 0
  int iterations = 30;  // timed runs per cell and round, ≥ 1
  // Sweeps over the whole table, ≥ 1; a cell's latency is the median of its rounds · iterations
  // timed runs (in steps of 0.1 µs). More rounds spread a cell's runs over time, so a burst of
  // load from other processes moves the median less.
  int rounds = 1;
};

// One measured model.
struct MeasuredModel {
  scheduler::ModelProfile profile;       // the cleaned-up table, memory, synthetic: false
  scheduler::ModelProfile::Table raw;    // the medians as measured, before MakeMonotone
  int adjusted_cells = 0;                // MakeMonotone's count
  int num_cores = 0;                     // n
  std::vector<int> cores_per_partition;  // parallel to raw.partitions_pct
  int iterations = 0;
  int warmup = 0;
  int rounds = 0;
};

// Profiles the servable model `entry` (its config and latest selected version) on this CPU.
// INVALID_ARGUMENT for a config the profiler cannot drive (a variable dim other than the batch dim,
// a string input, a non-ONNX platform, a bad option), with the model's name; engine errors (load,
// run) come back with the model, partition and batch prepended.
StatusOr<MeasuredModel> ProfileModel(const repository::ModelEntry& entry,
                                     const ProfileOptions& options);

// The model file's text: ProfileToYaml with `source` plus a `note:` on how it was measured and how
// many cells MakeMonotone adjusted (and `extra_note`, when not empty, e.g. "measured on a shared
// machine").
std::string MeasuredProfileYaml(const MeasuredModel& measured, const std::string& source,
                                const std::string& extra_note);

// Physical RAM of this machine in MB (2^20 bytes), for device.yaml's memory_mb.
double PhysicalMemoryMb();

// The CPU's model name from /proc/cpuinfo ("" when unknown), for device.yaml's `source:`.
std::string CpuModelName();

// The host name, for `source:` texts ("unknown-host" when it cannot be had).
std::string HostName();

// Writes <dir>/device.yaml and one <dir>/<model>.yaml per measured model (creating `dir`).
// INTERNAL naming the file on a write error.
struct WriteOptions {
  std::string model_source;   // each model file's `source:`
  std::string device_source;  // device.yaml's `source:`
  std::string extra_note;     // appended to each model file's `note:`
};
Status WriteProfileDirectory(const std::filesystem::path& dir, const scheduler::DeviceInfo& device,
                             const std::vector<MeasuredModel>& models, const WriteOptions& options);

}  // namespace tessera::profiler
