#include "engine/float16_interface_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tessera/common/float16.h"

namespace tessera::engine {
namespace {

std::vector<TensorInfo> WithTypes(std::vector<TensorInfo> infos,
                                  const std::map<std::string, DataType>& types) {
  for (TensorInfo& info : infos) {
    if (auto it = types.find(info.name); it != types.end()) info.dtype = it->second;
  }
  return infos;
}

}  // namespace

Float16InterfaceModel::Float16InterfaceModel(std::unique_ptr<Model> inner,
                                             std::map<std::string, DataType> input_types,
                                             std::map<std::string, DataType> output_types)
    : WrappedModel(std::move(inner)),
      input_types_(std::move(input_types)),
      output_types_(std::move(output_types)),
      inputs_(WithTypes(WrappedModel::inner().inputs(), input_types_)),
      outputs_(WithTypes(WrappedModel::inner().outputs(), output_types_)) {}

StatusOr<std::vector<TensorView>> Float16InterfaceModel::Widened(
    const std::vector<TensorView>& inputs) {
  std::vector<TensorView> views = inputs;
  widened_.resize(inputs.size());
  for (size_t i = 0; i < views.size(); ++i) {
    TensorView& view = views[i];
    auto it = input_types_.find(view.name);
    if (it == input_types_.end()) continue;
    if (view.dtype != it->second) {
      return absl::InvalidArgumentError(
          absl::StrCat("input \"", view.name, "\" is ", std::string(DataTypeToWireName(view.dtype)),
                       "; the model takes ", std::string(DataTypeToWireName(it->second))));
    }
    const size_t count = view.byte_size / sizeof(uint16_t);
    const std::optional<uint64_t> expected = DenseByteSize(view.shape, sizeof(uint16_t));
    if (!expected || *expected != view.byte_size) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" has ",
                                                     view.byte_size, " bytes for shape ",
                                                     ShapeToString(view.shape)));
    }
    std::vector<float>& wide = widened_[i];
    wide.resize(count);
    const auto* narrow = static_cast<const uint16_t*>(view.data);
    if (it->second == DataType::kFp16) {
      Fp16ToFloat(narrow, wide.data(), count);
    } else {
      Bf16ToFloat(narrow, wide.data(), count);
    }
    view.dtype = DataType::kFp32;
    view.data = wide.data();
    view.byte_size = count * sizeof(float);
    view.device_data = nullptr;  // the device copy, if any, holds the 16-bit bytes
    view.device_ready = nullptr;
  }
  return views;
}

void Float16InterfaceModel::Narrow(std::vector<Tensor>* outputs) const {
  for (Tensor& output : *outputs) {
    auto it = output_types_.find(output.name);
    if (it == output_types_.end() || output.dtype != DataType::kFp32) continue;
    const size_t count = output.bytes.size() / sizeof(float);
    std::vector<std::byte> narrow(count * sizeof(uint16_t));
    const auto* wide = reinterpret_cast<const float*>(output.bytes.data());
    auto* out = reinterpret_cast<uint16_t*>(narrow.data());
    if (it->second == DataType::kFp16) {
      FloatToFp16(wide, out, count);
    } else {
      FloatToBf16(wide, out, count);
    }
    output.bytes = std::move(narrow);
    output.dtype = it->second;
  }
}

Status Float16InterfaceModel::Run(const std::vector<TensorView>& inputs,
                                  std::vector<Tensor>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<TensorView> views, Widened(inputs));
  TESSERA_RETURN_IF_ERROR(inner().Run(views, outputs));
  Narrow(outputs);
  return absl::OkStatus();
}

Status Float16InterfaceModel::RunTimed(const std::vector<TensorView>& inputs,
                                       std::vector<Tensor>* outputs,
                                       std::vector<LayerTiming>* timings) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<TensorView> views, Widened(inputs));
  TESSERA_RETURN_IF_ERROR(inner().RunTimed(views, outputs, timings));
  Narrow(outputs);
  return absl::OkStatus();
}

}  // namespace tessera::engine
