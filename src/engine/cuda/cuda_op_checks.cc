// Load-time checks of CUDA ops (CudaOpDef::check): what a plan step would refuse at the first Run,
// found from the graph alone so that LoadOnnxModel reports it, and so that it can be checked on a
// machine without a GPU (CheckCudaSupport).
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_ops.h"

namespace tessera::engine::cuda {

std::string CheckHostInputs(const CheckCtx& ctx, std::initializer_list<size_t> indices) {
  for (size_t i : indices) {
    if (ctx.InputOnDevice(i)) {
      return absl::StrCat("input ", i, " (\"", ctx.graph.value_names[ctx.node.inputs[i]],
                          "\") is computed on the device, and the CUDA kernel needs it on the "
                          "host (a constant or computed from shapes)");
    }
  }
  return "";
}

std::string CheckFloatInputs(const CheckCtx& ctx) {
  for (int id : ctx.node.inputs) {
    if (id == kNoValue || ctx.graph.IsConstant(id)) continue;
    const DataType t = static_cast<size_t>(id) < ctx.graph.dtypes.size() ? ctx.graph.dtypes[id]
                                                                         : DataType::kInvalid;
    if (t != DataType::kInvalid && t != DataType::kFp32) {
      return absl::StrCat("input \"", ctx.graph.value_names[id], "\" is ", TypeName(t),
                          "; the CUDA kernel takes FP32 only");
    }
  }
  return "";
}

std::string CheckArithmeticInputs(const CheckCtx& ctx) {
  for (int id : ctx.node.inputs) {
    if (id == kNoValue) continue;
    const DataType t = ctx.graph.IsConstant(id) ? ctx.graph.constants[id]->dtype()
                       : static_cast<size_t>(id) < ctx.graph.dtypes.size() ? ctx.graph.dtypes[id]
                                                                           : DataType::kInvalid;
    if (t != DataType::kInvalid && t != DataType::kFp32 && t != DataType::kInt32 &&
        t != DataType::kInt64) {
      return absl::StrCat("input \"", ctx.graph.value_names[id], "\" is ", TypeName(t),
                          "; the CUDA kernel takes FP32, INT32 or INT64");
    }
  }
  return "";
}

std::string CheckFloatAndHostInputs(const CheckCtx& ctx, std::initializer_list<size_t> indices) {
  std::string why = CheckFloatInputs(ctx);
  return why.empty() ? CheckHostInputs(ctx, indices) : why;
}

std::string CheckSoftmax(const CheckCtx& ctx) {
  if (std::string why = CheckFloatInputs(ctx); !why.empty()) return why;
  // Opset >= 13 normalises one axis; the kernel takes the last one only.
  if (ctx.node.opset < 13 || ctx.node.inputs.empty()) return "";
  const auto& shape = ctx.graph.shapes[ctx.node.inputs[0]];
  const int64_t axis = ctx.node.attributes.GetInt("axis", -1);
  if (shape.has_value() && axis != -1 && axis != static_cast<int64_t>(shape->size()) - 1) {
    return "Softmax over an axis other than the last";
  }
  return "";
}

std::string CheckLayerNorm(const CheckCtx& ctx) {
  if (std::string why = CheckFloatInputs(ctx); !why.empty()) return why;
  for (size_t o = 1; o < ctx.node.outputs.size(); ++o) {
    if (ctx.node.outputs[o] != kNoValue) return "the Mean and InvStdDev outputs are not supported";
  }
  return "";
}

std::string CheckReduceMean(const CheckCtx& ctx) {
  if (std::string why = CheckFloatAndHostInputs(ctx, {1}); !why.empty()) return why;
  if (ctx.node.inputs.empty() || !ctx.graph.shapes[ctx.node.inputs[0]]) return "";
  // The kernel is a row mean: the reduced axes must be the trailing ones.
  const int64_t rank = static_cast<int64_t>(ctx.graph.shapes[ctx.node.inputs[0]]->size());
  std::vector<int64_t> axes = ctx.node.attributes.GetInts("axes");
  if (ctx.node.inputs.size() > 1 && ctx.node.inputs[1] != kNoValue &&
      ctx.graph.IsConstant(ctx.node.inputs[1])) {
    const Value& c = *ctx.graph.constants[ctx.node.inputs[1]];
    if (c.dtype() == DataType::kInt64) {
      axes.assign(c.data<int64_t>(), c.data<int64_t>() + c.num_elements());
    }
  }
  std::set<int64_t> normalized;
  for (int64_t a : axes) normalized.insert(a < 0 ? a + rank : a);
  if (!normalized.empty() &&
      (*normalized.begin() != rank - static_cast<int64_t>(normalized.size()) ||
       *normalized.rbegin() != rank - 1)) {
    return "ReduceMean over axes that are not the trailing ones";
  }
  return "";
}

}  // namespace tessera::engine::cuda
