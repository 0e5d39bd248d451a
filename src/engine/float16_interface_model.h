// A Model whose file declares FLOAT16 or BFLOAT16 graph inputs or outputs (Graph::input_float16):
// the backend's model computes those in FP32, and this wrapper gives callers the declared types.
// Inputs are widened before the Run (exactly) and outputs rounded to nearest even after it, as
// onnxruntime's CPU provider casts around ops it has no 16-bit kernels for. LoadOnnxModel wraps a
// model in it only when the file declares such a tensor, so every other model runs as before.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/wrapped_model.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {

class Float16InterfaceModel final : public WrappedModel {
 public:
  // The maps name the inner model's inputs and outputs that are 16-bit at the interface, with
  // their types (kFp16 or kBf16).
  Float16InterfaceModel(std::unique_ptr<Model> inner, std::map<std::string, DataType> input_types,
                        std::map<std::string, DataType> output_types);

  const std::vector<TensorInfo>& inputs() const override { return inputs_; }
  const std::vector<TensorInfo>& outputs() const override { return outputs_; }
  Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) override;
  Status RunTimed(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                  std::vector<LayerTiming>* timings) override;

 private:
  // `inputs` with the 16-bit ones replaced by FP32 views of `widened_` (this Run's copies).
  StatusOr<std::vector<TensorView>> Widened(const std::vector<TensorView>& inputs);
  void Narrow(std::vector<Tensor>* outputs) const;

  std::map<std::string, DataType> input_types_;
  std::map<std::string, DataType> output_types_;
  std::vector<TensorInfo> inputs_;
  std::vector<TensorInfo> outputs_;
  std::vector<std::vector<float>> widened_;  // kept between Runs (one caller at a time)
};

}  // namespace tessera::engine
