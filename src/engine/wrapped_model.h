// A Model that adapts another at its interface (DefaultedInputsModel, Float16InterfaceModel):
// every call goes to the wrapped model unless the adapter overrides it.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "tessera/engine/engine.h"

namespace tessera::engine {

class WrappedModel : public Model {
 public:
  explicit WrappedModel(std::unique_ptr<Model> inner) : inner_(std::move(inner)) {}

  const std::vector<TensorInfo>& inputs() const override { return inner_->inputs(); }
  const std::vector<TensorInfo>& outputs() const override { return inner_->outputs(); }
  uint64_t weight_bytes() const override { return inner_->weight_bytes(); }
  Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) override {
    return inner_->Run(inputs, outputs);
  }
  Status RunTimed(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                  std::vector<LayerTiming>* timings) override {
    return inner_->RunTimed(inputs, outputs, timings);
  }
  StatusOr<MemoryPlanInfo> PlanMemory(int64_t batch) const override {
    return inner_->PlanMemory(batch);
  }
  StatusOr<ExportedWeights> ExportWeights() const override { return inner_->ExportWeights(); }
  WeightImportOutcome weight_import() const override { return inner_->weight_import(); }

 protected:
  Model& inner() { return *inner_; }
  const Model& inner() const { return *inner_; }

 private:
  std::unique_ptr<Model> inner_;
};

}  // namespace tessera::engine
