#include "engine/defaulted_inputs_model.h"

#include <utility>

namespace tessera::engine {

DefaultedInputsModel::DefaultedInputsModel(std::unique_ptr<Model> inner,
                                           std::map<std::string, Value> defaults)
    : WrappedModel(std::move(inner)), defaults_(std::move(defaults)) {
  for (const auto& [name, value] : defaults_) {
    default_views_.push_back(TensorView{name, value.dtype(), value.shape(),
                                        value.mutable_data<void>(), value.byte_size()});
  }
}

const std::vector<TensorView>& DefaultedInputsModel::Completed(
    const std::vector<TensorView>& inputs, std::vector<TensorView>* scratch) const {
  auto given = [&](const std::string& name) {
    for (const TensorView& view : inputs) {
      if (view.name == name) return true;
    }
    return false;
  };
  bool all_given = true;
  for (const TensorView& view : default_views_) all_given = all_given && given(view.name);
  if (all_given) return inputs;
  *scratch = inputs;
  for (const TensorView& view : default_views_) {
    if (!given(view.name)) scratch->push_back(view);
  }
  return *scratch;
}

Status DefaultedInputsModel::Run(const std::vector<TensorView>& inputs,
                                 std::vector<Tensor>* outputs) {
  std::vector<TensorView> scratch;
  return inner().Run(Completed(inputs, &scratch), outputs);
}

Status DefaultedInputsModel::RunTimed(const std::vector<TensorView>& inputs,
                                      std::vector<Tensor>* outputs,
                                      std::vector<LayerTiming>* timings) {
  std::vector<TensorView> scratch;
  return inner().RunTimed(Completed(inputs, &scratch), outputs, timings);
}

}  // namespace tessera::engine
