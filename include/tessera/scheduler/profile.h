// Latency profiles L(b,p): how long one batch of a model takes on a partition of a device.
//
// A profile is the scheduler's whole knowledge of a model on one device kind (seed 001 §4.1, Tab.
// 1; seed 000 §4.2): latency for batch b on a partition of p % of the device's compute, the model's
// device memory, and its standalone L2 / DRAM utilisation (the interference features of seed 001
// §4.4). On disk: profiles/<device>/<model>.yaml plus profiles/<device>/device.yaml, documented in
// docs/profile-format.md. tessera-profile writes measured ones; profiles/synthetic-2080ti/ holds a
// synthetic set shaped like seed 001 Fig. 4, labelled synthetic.
//
// Thread-safety: immutable after construction; share freely.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::scheduler {

// Standalone utilisation of one model at one batch on the whole device (partition 100 %),
// fractions in [0, 1]: the interference features of seed 001 §4.4.
struct UtilisationPoint {
  int batch = 1;
  double l2_util = 0;
  double dram_util = 0;
};

class ModelProfile {
 public:
  struct Table {
    std::vector<int> partitions_pct;  // ascending, each in (0, 100]; must contain 100
    std::vector<int> batches;         // ascending, each ≥ 1; must contain 1
    // latency_ms[i][j] = L(batches[j], partitions_pct[i]) in milliseconds, > 0.
    std::vector<std::vector<double>> latency_ms;
  };

  // Validates the table (shapes, ordering, positive latencies, latency not increasing with the
  // partition for a fixed batch beyond 5 % measurement noise) and the utilisation points (ascending
  // batches, fractions in [0,1]); INVALID_ARGUMENT naming the model and the offending entry.
  static StatusOr<ModelProfile> Create(std::string model, std::string device, Table table,
                                       double memory_mb, std::vector<UtilisationPoint> utilisation,
                                       bool synthetic);

  // L(b,p) in ms, for 1 ≤ batch ≤ max_batch() and 0 < partition_pct ≤ 100. Linear interpolation
  // between profiled batches and between profiled partitions. Below the smallest profiled partition
  // the work is assumed to stretch inversely with the compute share: L(b,p_min)·p_min/p.
  double LatencyMs(int batch, int partition_pct) const;

  // Standalone utilisation at (batch, partition): the 100 % figures interpolated over batch and
  // scaled by partition/100, as the gpulet artifact does (seed 001 §4.4 [R]). 0 when no
  // utilisation points were profiled.
  double L2Util(int batch, int partition_pct) const;
  double DramUtil(int batch, int partition_pct) const;

  const std::string& model() const { return model_; }
  const std::string& device() const { return device_; }
  double memory_mb() const { return memory_mb_; }
  bool synthetic() const { return synthetic_; }
  int max_batch() const { return table_.batches.back(); }
  const Table& table() const { return table_; }
  const std::vector<UtilisationPoint>& utilisation() const { return utilisation_; }

 private:
  ModelProfile() = default;
  double Interpolate(const std::vector<double>& values, int batch) const;

  std::string model_;
  std::string device_;
  Table table_;
  double memory_mb_ = 0;
  std::vector<UtilisationPoint> utilisation_;
  bool synthetic_ = false;
};

// The profile file, strict: unknown keys and bad values are "<source>:<line>: <key>: <reason>".
// Format: docs/profile-format.md.
StatusOr<ModelProfile> ParseProfileYaml(const std::string& text, std::string_view source);
StatusOr<ModelProfile> LoadProfileFile(const std::filesystem::path& path);
// Parse(ProfileToYaml(p)) gives back equal tables (doubles are written in their shortest
// round-trip form). `source`, when not empty, is written as the file's free-text `source:` key
// (where the numbers come from); it is not part of ModelProfile.
std::string ProfileToYaml(const ModelProfile& profile, std::string_view source = "");

// What the scheduler needs to know about the device kind itself (profiles/<device>/device.yaml).
struct DeviceInfo {
  std::string name;
  double memory_mb = 0;  // device memory capacity
  bool synthetic = false;
};

// device.yaml, strict like the profile files.
StatusOr<DeviceInfo> ParseDeviceYaml(const std::string& text, std::string_view source);
std::string DeviceToYaml(const DeviceInfo& device, std::string_view source = "");

// Every profile of one device kind, keyed by model name.
class ProfileSet {
 public:
  ProfileSet() = default;
  explicit ProfileSet(DeviceInfo device) : device_(std::move(device)) {}

  // Reads <dir>/device.yaml and every other <dir>/*.yaml except interference*.yaml (the fitted
  // interference.yaml and e.g. a simulator's interference_truth.yaml) as a model profile; a
  // profile's file must be named <model>.yaml. NOT_FOUND for a missing directory or device.yaml;
  // errors name the file.
  static StatusOr<ProfileSet> LoadDirectory(const std::filesystem::path& dir);

  // INVALID_ARGUMENT if a profile for that model exists already or is for another device.
  Status Add(ModelProfile profile);
  // nullptr when the model has no profile.
  const ModelProfile* Find(std::string_view model) const;
  // NOT_FOUND "no profile for model 'x' on device 'y'".
  StatusOr<const ModelProfile*> Get(std::string_view model) const;
  std::vector<std::string> models() const;
  const DeviceInfo& device() const { return device_; }

 private:
  DeviceInfo device_;
  std::map<std::string, ModelProfile, std::less<>> profiles_;
};

}  // namespace tessera::scheduler
