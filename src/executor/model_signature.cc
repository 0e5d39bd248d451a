#include "executor/model_signature.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace tessera::executor {
namespace {

const engine::TensorInfo* Find(const std::vector<engine::TensorInfo>& infos,
                               const std::string& name) {
  for (const auto& info : infos) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string Names(const std::vector<engine::TensorInfo>& infos) {
  std::vector<std::string> names;
  for (const auto& info : infos) names.push_back(info.name);
  return absl::StrJoin(names, ", ");
}

Status CheckTensor(const char* kind, const ipc::TensorSpec& spec, const engine::TensorInfo& info,
                   int max_batch_size) {
  const auto config_type = static_cast<DataType>(spec.data_type());
  if (config_type != info.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " '", spec.name(), "': config data type ",
                                                   std::string(DataTypeToWireName(config_type)),
                                                   " differs from the model's ",
                                                   std::string(DataTypeToWireName(info.dtype))));
  }
  const Shape config_dims(spec.dims().begin(), spec.dims().end());
  const bool batched = max_batch_size > 0 && !spec.flat();
  auto mismatch = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind, " '", spec.name(), "': config dims ", ShapeToString(config_dims),
        batched       ? absl::StrCat(" (plus batch dim, max_batch_size ", max_batch_size, ")")
        : spec.flat() ? " (flat for the whole batch: ragged batching)"
                      : "",
        " do not match the model's shape ", ShapeToString(info.shape), ": ", why));
  };
  const size_t offset = batched ? 1 : 0;
  if (info.shape.size() != config_dims.size() + offset) {
    return mismatch("different rank");
  }
  if (batched && info.shape[0] >= 0 && info.shape[0] < max_batch_size) {
    return mismatch(absl::StrCat("the model's batch dim is fixed at ", info.shape[0]));
  }
  for (size_t i = 0; i < config_dims.size(); ++i) {
    int64_t c = config_dims[i];
    int64_t m = info.shape[i + offset];
    if (c >= 0 && m >= 0 && c != m) {
      return mismatch(absl::StrCat("dim ", i + offset, " is ", c, " vs ", m));
    }
    if (c < 0 && m >= 0) {
      // The frontend would let through sizes the engine then refuses, batch by batch.
      return mismatch(absl::StrCat("dim ", i + offset, " takes any size in the config, but only ",
                                   m, " in the model: give it as ", m));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Status CheckModelSignature(const ipc::LoadModel& config, const engine::Model& model) {
  // The client's inputs, then the ones the server makes per batch (ragged batching).
  auto check_inputs = [&](const auto& specs, const char* kind, const char* listed_as) {
    for (const auto& spec : specs) {
      const engine::TensorInfo* info = Find(model.inputs(), spec.name());
      if (info == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(listed_as, " '", spec.name(),
                         "' is not an input of the model (inputs: ", Names(model.inputs()), ")"));
      }
      TESSERA_RETURN_IF_ERROR(CheckTensor(kind, spec, *info, config.max_batch_size()));
    }
    return absl::OkStatus();
  };
  TESSERA_RETURN_IF_ERROR(check_inputs(config.inputs(), "input", "config input"));
  TESSERA_RETURN_IF_ERROR(check_inputs(config.batch_inputs(), "batch input", "batch_input target"));
  if (config.inputs_size() > 0) {
    // The server only ever sends the inputs the config names; a missing one fails every batch.
    for (const auto& info : model.inputs()) {
      bool listed = info.has_default;
      for (const auto& spec : config.inputs()) listed = listed || spec.name() == info.name;
      for (const auto& spec : config.batch_inputs()) listed = listed || spec.name() == info.name;
      if (!listed) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model input '", info.name, "' (", std::string(DataTypeToWireName(info.dtype)), " ",
            ShapeToString(info.shape), ") is missing from the config"));
      }
    }
  }
  for (const auto& spec : config.outputs()) {
    const engine::TensorInfo* info = Find(model.outputs(), spec.name());
    if (info == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("config output '", spec.name(),
                       "' is not an output of the model (outputs: ", Names(model.outputs()), ")"));
    }
    TESSERA_RETURN_IF_ERROR(CheckTensor("output", spec, *info, config.max_batch_size()));
  }
  return absl::OkStatus();
}

void WarnOfOptionalInputsWithoutDefault(const ipc::LoadModel& config, const engine::Model& model) {
  for (const ipc::TensorSpec& spec : config.inputs()) {
    if (!spec.optional()) continue;
    const engine::TensorInfo* info = Find(model.inputs(), spec.name());
    if (info == nullptr || info->has_default) continue;
    spdlog::warn(
        "model {} version {}: input '{}' is optional, but the model file has no default for it "
        "(a graph input with an initializer of that name): a request that leaves it out fails",
        config.model_name(), config.version(), spec.name());
  }
}

}  // namespace tessera::executor
