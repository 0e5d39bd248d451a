// The table of supported ONNX ops and the small helpers every kernel shares.
#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

constexpr LayoutSupport kElementwise = LayoutSupport::kElementwise;

// The own kernels, and (onednn) the same with oneDNN's replacing them where it has them.
const std::map<std::string, OpDef>& Registry(bool onednn) {
  static const std::map<std::string, OpDef>* own = [] {
    auto* r = new std::map<std::string, OpDef>{
        {"Abs", {RunAbs, nullptr, kElementwise}},
        {"Acos", {RunAcos, nullptr, kElementwise}},
        {"Acosh", {RunAcosh, nullptr, kElementwise}},
        {"Add", {RunAdd, nullptr, kElementwise}},
        {"And", {RunAnd}},
        {"ArgMax", {RunArgMax}},
        {"ArgMin", {RunArgMin}},
        {"Asin", {RunAsin, nullptr, kElementwise}},
        {"Asinh", {RunAsinh, nullptr, kElementwise}},
        {"Atan", {RunAtan, nullptr, kElementwise}},
        {"Atanh", {RunAtanh, nullptr, kElementwise}},
        {"AveragePool", {RunAveragePool, CheckPool}},
        {"BatchNormalization",
         {RunBatchNormalization, CheckBatchNormalization, LayoutSupport::kAny}},
        {"Cast", {RunCast, CheckCast}},
        {"CastLike", {RunCastLike}},
        {"Ceil", {RunCeil, nullptr, kElementwise}},
        {"Celu", {RunCelu, nullptr, kElementwise}},
        {"Clip", {RunClip, nullptr, kElementwise}},
        {"Compress", {RunCompress}},
        {"Concat", {RunConcat, nullptr, LayoutSupport::kAny}},
        {"Constant", {RunConstant, CheckConstant}},
        {"ConstantOfShape", {RunConstantOfShape}},
        {"Conv", {RunConv, CheckConv, LayoutSupport::kRowMajorOnly, nullptr, false, 3}},
        {"ConvTranspose", {RunConvTranspose, CheckConvTranspose}},
        {"Cos", {RunCos, nullptr, kElementwise}},
        {"Cosh", {RunCosh, nullptr, kElementwise}},
        {"CumSum", {RunCumSum}},
        {"DepthToSpace", {RunDepthToSpace, CheckDepthToSpace}},
        {"Div", {RunDiv, nullptr, kElementwise}},
        {"Dropout", {RunDropout, CheckDropout}},
        {"Einsum", {RunEinsum, CheckEinsum}},
        {"Elu", {RunElu, nullptr, kElementwise}},
        {"Equal", {RunEqual}},
        {"Erf", {RunErf, nullptr, kElementwise}},
        {"Exp", {RunExp, nullptr, kElementwise}},
        {"Expand", {RunExpand}},
        {"EyeLike", {RunEyeLike, CheckEyeLike}},
        {"Flatten", {RunFlatten}},
        {"Floor", {RunFloor, nullptr, kElementwise}},
        {"Gather", {RunGather}},
        {"GatherElements", {RunGatherElements}},
        {"GatherND", {RunGatherND}},
        {"Gemm", {RunGemm}},
        {"GlobalAveragePool", {RunGlobalAveragePool}},
        {"GlobalMaxPool", {RunGlobalMaxPool}},
        {"Greater", {RunGreater}},
        {"GreaterOrEqual", {RunGreaterOrEqual}},
        {"HardSigmoid", {RunHardSigmoid, nullptr, kElementwise}},
        {"HardSwish", {RunHardSwish, nullptr, kElementwise}},
        {"Hardmax", {RunHardmax}},
        {"Identity", {RunIdentity, nullptr, kElementwise}},
        {"InstanceNormalization", {RunInstanceNormalization, nullptr, LayoutSupport::kAny}},
        {"IsInf", {RunIsInf, nullptr, kElementwise}},
        {"IsNaN", {RunIsNaN, nullptr, kElementwise}},
        {"LRN", {RunLrn, CheckLrn}},
        {"LayerNormalization", {RunLayerNormalization, CheckLayerNormalization}},
        {"LeakyRelu", {RunLeakyRelu, nullptr, kElementwise}},
        {"Less", {RunLess}},
        {"LessOrEqual", {RunLessOrEqual}},
        {"Log", {RunLog, nullptr, kElementwise}},
        {"LogSoftmax", {RunLogSoftmax}},
        {"MatMul", {RunMatMul, CheckMatMul}},
        {"Max", {RunMax, nullptr, kElementwise}},
        {"MaxPool", {RunMaxPool, CheckPool}},
        {"Mean", {RunMean, nullptr, kElementwise}},
        {"MeanVarianceNormalization", {RunMeanVarianceNormalization}},
        {"Min", {RunMin, nullptr, kElementwise}},
        {"Mod", {RunMod, nullptr, kElementwise}},
        {"Mul", {RunMul, nullptr, kElementwise}},
        {"Neg", {RunNeg, nullptr, kElementwise}},
        {"NonMaxSuppression", {RunNonMaxSuppression}},
        {"NonZero", {RunNonZero}},
        {"Not", {RunNot}},
        {"OneHot", {RunOneHot}},
        {"Or", {RunOr}},
        {"PRelu", {RunPRelu, nullptr, kElementwise}},
        {"Pad", {RunPad, CheckPad, LayoutSupport::kAny}},
        {"Pow", {RunPow, nullptr, kElementwise}},
        {"QuantizeLinear", {RunQuantizeLinear, CheckQuantizeLinear, kElementwise}},
        {"DequantizeLinear", {RunDequantizeLinear, nullptr, kElementwise}},
        // Per tensor: the elements' order does not matter.
        {"DynamicQuantizeLinear", {RunDynamicQuantizeLinear, nullptr, kElementwise}},
        {"ConvInteger", {RunConvInteger, CheckConvInteger}},
        {kConvIntegerToFloat, {RunConvIntegerToFloat}},
        {"MatMulInteger", {RunMatMulInteger}},
        {kMatMulIntegerToFloat, {RunMatMulIntegerToFloat}},
        {"QLinearConv", {RunQLinearConv, CheckQLinearConv}},
        {"QLinearMatMul", {RunQLinearMatMul}},
        {"com.microsoft.QLinearAdd", {RunQLinearAdd, nullptr, kElementwise}},
        {"Range", {RunRange}},
        {"Reciprocal", {RunReciprocal, nullptr, kElementwise}},
        {"ReduceL1", {RunReduceL1, nullptr, LayoutSupport::kAny}},
        {"ReduceL2", {RunReduceL2, nullptr, LayoutSupport::kAny}},
        {"ReduceLogSum", {RunReduceLogSum, nullptr, LayoutSupport::kAny}},
        {"ReduceLogSumExp", {RunReduceLogSumExp, nullptr, LayoutSupport::kAny}},
        {"ReduceMax", {RunReduceMax, nullptr, LayoutSupport::kAny}},
        {"ReduceMean", {RunReduceMean, nullptr, LayoutSupport::kAny}},
        {"ReduceMin", {RunReduceMin, nullptr, LayoutSupport::kAny}},
        {"ReduceProd", {RunReduceProd, nullptr, LayoutSupport::kAny}},
        {"ReduceSum", {RunReduceSum, nullptr, LayoutSupport::kAny}},
        {"ReduceSumSquare", {RunReduceSumSquare, nullptr, LayoutSupport::kAny}},
        {"Relu", {RunRelu, nullptr, kElementwise}},
        {"Reshape", {RunReshape}},
        {"Resize", {RunResize, CheckResize, LayoutSupport::kAny}},
        {"Round", {RunRound, nullptr, kElementwise}},
        {"Scatter", {RunScatterElements, CheckScatter}},
        {"ScatterElements", {RunScatterElements, CheckScatter}},
        {"ScatterND", {RunScatterND, CheckScatter}},
        {"Selu", {RunSelu, nullptr, kElementwise}},
        {"Shape", {RunShape}},
        {"Shrink", {RunShrink, nullptr, kElementwise}},
        {"Sigmoid", {RunSigmoid, nullptr, kElementwise}},
        {"Sign", {RunSign, nullptr, kElementwise}},
        {"Sin", {RunSin, nullptr, kElementwise}},
        {"Sinh", {RunSinh, nullptr, kElementwise}},
        {"Size", {RunSize}},
        {"Slice", {RunSlice}},
        {"Softmax", {RunSoftmax}},
        {"Softplus", {RunSoftplus, nullptr, kElementwise}},
        {"Softsign", {RunSoftsign, nullptr, kElementwise}},
        {"SpaceToDepth", {RunSpaceToDepth}},
        {"Split", {RunSplit, nullptr, LayoutSupport::kAny}},
        {"Sqrt", {RunSqrt, nullptr, kElementwise}},
        {"Squeeze", {RunSqueeze}},
        {"Sub", {RunSub, nullptr, kElementwise}},
        {"Sum", {RunSum, nullptr, kElementwise}},
        {"Tan", {RunTan, nullptr, kElementwise}},
        {"Tanh", {RunTanh, nullptr, kElementwise}},
        {"ThresholdedRelu", {RunThresholdedRelu, nullptr, kElementwise}},
        {"Tile", {RunTile}},
        {"TopK", {RunTopK, CheckTopK}},
        {"Transpose", {RunTranspose, nullptr, LayoutSupport::kAny}},
        {"Trilu", {RunTrilu}},
        {"Unsqueeze", {RunUnsqueeze}},
        {"Upsample", {RunResize, CheckResize, LayoutSupport::kAny}},
        {"Where", {RunWhere}},
        {"Xor", {RunXor}},
        {"StringNormalizer", {RunStringNormalizer, CheckStringNormalizer}},
        {std::string(kMlDomainPrefix) + "LabelEncoder",
         {RunLabelEncoder, CheckLabelEncoder, LayoutSupport::kRowMajorOnly, MakeLabelEncoderState}},
    };
    // The kernels that take STRING inputs: data movement (by element size, so string handles
    // move like any 8-byte element), comparison and conversion, and the text ops.
    for (const char* op : {"Cast", "CastLike", "Concat", "Equal", "Expand", "Flatten", "Gather",
                           "Identity", "Reshape", "Shape", "Size", "Slice", "Split", "Squeeze",
                           "StringNormalizer", "Tile", "Transpose", "Unsqueeze", "Where"}) {
      r->at(op).strings = true;
    }
    r->at(std::string(kMlDomainPrefix) + "LabelEncoder").strings = true;
    return r;
  }();
  static const std::map<std::string, OpDef>* with_onednn = [] {
    auto* r = new std::map<std::string, OpDef>(*own);
#ifdef TESSERA_HAVE_ONEDNN
    // They fall back to the own kernels per call for what oneDNN does not cover.
    (*r)["Conv"] = {RunDnnlConv, CheckConv, LayoutSupport::kAny, MakeDnnlConvState, false, 3};
    (*r)["ConvTranspose"] = {RunDnnlConvTranspose, CheckConvTranspose, LayoutSupport::kAny,
                             MakeDnnlConvTransposeState};
    (*r)["MaxPool"] = {RunDnnlMaxPool, CheckPool, LayoutSupport::kAny, MakeDnnlPoolState};
    (*r)["AveragePool"] = {RunDnnlAveragePool, CheckPool, LayoutSupport::kAny, MakeDnnlPoolState};
    (*r)["GlobalAveragePool"] = {RunGlobalAveragePoolAnyLayout, nullptr, LayoutSupport::kAny};
    (*r)["QLinearConv"] = {RunDnnlQLinearConv, CheckQLinearConv, LayoutSupport::kAny,
                           MakeDnnlQLinearConvState};
    (*r)[kConvIntegerToFloat] = {RunDnnlConvIntegerToFloat, nullptr, LayoutSupport::kAny,
                                 MakeDnnlConvIntegerToFloatState};
    for (const char* op : {"MatMulInteger", kMatMulIntegerToFloat}) {
      (*r)[op] = {RunDnnlMatMulInteger, nullptr, LayoutSupport::kRowMajorOnly,
                  MakeDnnlMatMulIntegerState};
    }
#endif
    return r;
  }();
  return onednn ? *with_onednn : *own;
}

}  // namespace

Value OpContext::NewOutput(size_t index, DataType dtype, Shape shape) const {
  if (allocated_outputs != nullptr && index < allocated_outputs->size()) {
    (*allocated_outputs)[index] = true;
  }
  if (planned_outputs != nullptr && index < planned_outputs->size()) {
    const Value& slot = (*planned_outputs)[index];
    const size_t bytes = static_cast<size_t>(ElementCount(shape)) * ElementSize(dtype);
    // A size mismatch (the shapes changed against the plan) falls back to a fresh allocation:
    // the planned bytes simply stay unused, other values are unaffected.
    if (slot.defined() && slot.byte_size() == bytes && bytes > 0) {
      return Value::Borrow(dtype, std::move(shape), slot.mutable_data<void>());
    }
  }
  return Value::Allocate(dtype, std::move(shape));
}

const OpDef* FindOp(const std::string& op_type, bool onednn) {
  const std::map<std::string, OpDef>& registry = Registry(onednn);
  auto it = registry.find(op_type);
  return it == registry.end() ? nullptr : &it->second;
}

std::vector<std::string> SupportedOps() {
  std::vector<std::string> ops;
  for (const auto& [name, def] : Registry(false)) ops.push_back(name);
  return ops;
}

Status RefuseStrings(const OpDef& op, const std::string& op_type, const Inputs& inputs) {
  if (op.strings) return absl::OkStatus();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] != nullptr && inputs[i]->dtype() == DataType::kString) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " is a BYTES (string) tensor; ",
                                                     op_type, " does not take string tensors"));
    }
  }
  return absl::OkStatus();
}

Status CheckStringUse(const Graph& graph) {
  std::vector<std::string> problems;
  for (const Node& node : graph.nodes) {
    const OpDef* op = FindOp(node.op_type, /*onednn=*/false);
    if (op == nullptr || op->strings) continue;
    for (int id : node.inputs) {
      if (id == kNoValue || static_cast<size_t>(id) >= graph.dtypes.size() ||
          graph.dtypes[id] != DataType::kString) {
        continue;
      }
      problems.push_back(
          absl::StrCat(node.Describe(graph.value_names), " reads \"", graph.value_names[id], "\""));
      break;
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "BYTES (string) tensors reach ops that do not take them: ", absl::StrJoin(problems, "; ")));
}

StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", ShapeToString(a), " and ",
                                                     ShapeToString(b), " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

StatusOr<const Value*> RequireInput(const Inputs& inputs, size_t index, const char* what,
                                    std::initializer_list<DataType> dtypes) {
  if (index >= inputs.size() || inputs[index] == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("missing input ", index, " (", what, ")"));
  }
  const Value* v = inputs[index];
  if (std::find(dtypes.begin(), dtypes.end(), v->dtype()) == dtypes.end()) {
    std::vector<std::string> names;
    for (DataType d : dtypes) names.push_back(TypeName(d));
    return absl::InvalidArgumentError(absl::StrCat("input ", index, " (", what, ") is ",
                                                   TypeName(v->dtype()), ", expected ",
                                                   absl::StrJoin(names, " or ")));
  }
  return v;
}

bool FusedClamp(const Node& node, float* lo, float* hi) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::string activation = node.attributes.GetString("tessera_activation", "");
  if (activation == "Relu") {
    *lo = 0.0f;
    *hi = kInf;
    return true;
  }
  if (activation != "Clip") return false;
  *lo = node.attributes.GetFloat("tessera_clip_min", -kInf);
  *hi = node.attributes.GetFloat("tessera_clip_max", kInf);
  return true;
}

StatusOr<int64_t> WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                                   int64_t pad_begin, int64_t pad_end, bool ceil_mode) {
  if (kernel < 1 || stride < 1 || dilation < 1 || pad_begin < 0 || pad_end < 0) {
    return absl::InvalidArgumentError("kernel, stride and dilation must be >= 1 and pads >= 0");
  }
  int64_t effective = (kernel - 1) * dilation + 1;
  int64_t span = in + pad_begin + pad_end - effective;
  if (span < 0) {
    return absl::InvalidArgumentError(absl::StrCat("window of ", effective,
                                                   " is larger than the padded input of ",
                                                   in + pad_begin + pad_end));
  }
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // As PyTorch and the ONNX reference do: a ceil-mode window that would start inside the end
  // padding is dropped.
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

}  // namespace tessera::engine::cpu
