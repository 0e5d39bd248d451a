// A Model whose inputs with defaults (ModelOptions::overridable_initializers) may be left out of a
// Run: it runs the backend's model with the defaults filled in. LoadOnnxModel wraps a model in it
// only when the model has such inputs, so every other model runs as before.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/value.h"
#include "engine/wrapped_model.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {

class DefaultedInputsModel final : public WrappedModel {
 public:
  // `defaults` by input name (Graph::input_defaults); their storage is kept alive here.
  DefaultedInputsModel(std::unique_ptr<Model> inner, std::map<std::string, Value> defaults);

  Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) override;
  Status RunTimed(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                  std::vector<LayerTiming>* timings) override;

 private:
  // `inputs` plus a view of each default they leave out; `inputs` itself when they leave none.
  const std::vector<TensorView>& Completed(const std::vector<TensorView>& inputs,
                                           std::vector<TensorView>* scratch) const;

  std::vector<TensorView> default_views_;  // into defaults_' storage
  std::map<std::string, Value> defaults_;
};

}  // namespace tessera::engine
