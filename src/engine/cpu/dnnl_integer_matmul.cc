// MatMulInteger as oneDNN's integer matrix product: 8-bit activations A [.., M, K] with a zero
// point of one value (DynamicQuantizeLinear's, known only at run time) times constant INT8
// weights B [K, N] with zero point 0, summed in INT32; the form quantize_dynamic gives every
// MatMul with weights. oneDNN runs it with VNNI or AMX dot products, four or more 8-bit products
// per lane and instruction, where the own kernel (integer_matmul.cc) multiplies INT16 pairs.
//
// Only where FastQLinearConv holds (8-bit dot products that sum into 32 bits: without them
// oneDNN's UINT8 x INT8 products go through saturating 16-bit pairs); anything else (weights that
// are not constant 8-bit [K, N], INT8 weights with a zero point, UINT8 ones with a zero point of
// more than one value, per-row activation zero points) runs the own kernel. A's rows are cut into
// one part per thread, each its own single-threaded primitive.
//
// UINT8 weights B (quantize_dynamic's QUInt8) with zero point zB: oneDNN's weights are INT8, so
// the primitive multiplies by B - 128, and each row of the product lacks
// (128 - zB) * sum_k (A[i, k] - zA), which is added exactly in INT32 after the primitive, or with
// an FP32 destination put in the destination first and taken in by a sum post-op (oneDNN keeps
// its brgemm kernels for that; a per-row binary add would send it to its reference kernel).
//
// kMatMulIntegerToFloat (graph.h; the same node with its Cast, scales, bias and GELU) is the same
// primitive with an FP32 destination and post-ops applied while each tile is in registers: the
// scales' product as a binary multiply, the bias as a binary add and GELU as an eltwise op.
#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/dnnl_util.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Fewer rows than this per part cost more in per-part overhead than the split gains.
constexpr int64_t kMinRowsPerPart = 16;

struct MatMulPart {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  memory weights;
  int64_t first_row = 0;
};

struct MatMulEntry {
  std::vector<MatMulPart> parts;
};

class IntegerMatMulState final : public KernelState {
 public:
  explicit IntegerMatMulState(bool constant_weights) : constant_weights(constant_weights) {}

  const bool constant_weights;  // B and its zero point, so B is reordered once
  PrimitiveCache<MatMulEntry> cache;
  ReorderedWeights weights;

  ShiftedWeights shifted_weights;  // UINT8 weights as INT8
};

// Where the zero points are: MatMulInteger's inputs 2 and 3, kMatMulIntegerToFloat's 4 and 5.
size_t AZeroIndex(const Node& node) { return node.op_type == kMatMulIntegerToFloat ? 4 : 2; }

// Whether the node's inputs are the form this kernel takes (see the top of the file).
bool Covered(const Inputs& inputs, size_t a_zero_index) {
  if (inputs.size() < 2 || inputs[0] == nullptr || inputs[1] == nullptr) return false;
  const Value& a = *inputs[0];
  const Value& b = *inputs[1];
  if ((a.dtype() != DataType::kUint8 && a.dtype() != DataType::kInt8) || b.rank() != 2 ||
      a.rank() < 2 || a.shape().back() != b.dim(0)) {
    return false;
  }
  const Value* a_zero = inputs.size() > a_zero_index ? inputs[a_zero_index] : nullptr;
  if (a_zero != nullptr && (a_zero->dtype() != a.dtype() || a_zero->num_elements() != 1)) {
    return false;
  }
  const Value* b_zero = inputs.size() > a_zero_index + 1 ? inputs[a_zero_index + 1] : nullptr;
  return PrimitiveWeights(b, b_zero);
}

// For UINT8 weights run as B - 128: (128 - zB) * sum_k (A[i, k] - zA) for `rows` rows of A from
// `first`, what each of those rows of the product lacks (see the top of the file).
void RowCorrections(const Value& a, int64_t first, int64_t rows, int64_t k, int32_t a_zero,
                    int32_t b_shift, int32_t* out) {
  const bool is_signed = a.dtype() == DataType::kInt8;
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t sum = EightBitRowSum(a.data<uint8_t>() + (first + i) * k, k, is_signed);
    out[i] = b_shift * (sum - static_cast<int32_t>(k) * a_zero);
  }
}

// What a kMatMulIntegerToFloat node adds to the product, when the primitive can apply it.
struct FloatEpilogue {
  std::vector<float> scales;  // a_scale * b_scale, one or one per column
  const Value* bias = nullptr;
  dnnl::algorithm activation = dnnl::algorithm::undef;
};

// FP32 [1, columns]: a post-op operand broadcast over the destination's rows.
memory::desc RowVectorDesc(int64_t columns) {
  return memory::desc(Dims({1, columns}), memory::data_type::f32, Tag::ab);
}

// False for what the own kernel must run (or report): scales, bias or activation of another form.
bool FloatEpilogueOf(const Node& node, const Inputs& inputs, int64_t n, FloatEpilogue* e) {
  const Value* a_scale = inputs.size() > 2 ? inputs[2] : nullptr;
  const Value* b_scale = inputs.size() > 3 ? inputs[3] : nullptr;
  e->bias = inputs.size() > 6 ? inputs[6] : nullptr;
  if (a_scale == nullptr || b_scale == nullptr || a_scale->dtype() != DataType::kFp32 ||
      b_scale->dtype() != DataType::kFp32 || a_scale->num_elements() != 1 ||
      !OneOrOnePerLastDim(*b_scale, n) ||
      (e->bias != nullptr &&
       (e->bias->dtype() != DataType::kFp32 || e->bias->num_elements() != n))) {
    return false;
  }
  const std::string activation = node.attributes.GetString("tessera_activation", "");
  if (activation == "Gelu") {
    e->activation = dnnl::algorithm::eltwise_gelu_erf;
  } else if (activation == "GeluTanh") {
    e->activation = dnnl::algorithm::eltwise_gelu_tanh;
  } else if (!activation.empty()) {
    return false;
  }
  // As the fused Mul nodes computed it, in FP32.
  e->scales.resize(static_cast<size_t>(b_scale->num_elements()));
  for (size_t j = 0; j < e->scales.size(); ++j) {
    e->scales[j] = a_scale->data<float>()[0] * b_scale->data<float>()[j];
  }
  return true;
}

}  // namespace

std::unique_ptr<KernelState> MakeDnnlMatMulIntegerState(const Node& node, const Graph& graph) {
  bool constant = node.inputs.size() > 1 && graph.IsConstant(node.inputs[1]);
  const size_t b_zero = AZeroIndex(node) + 1;
  if (node.inputs.size() > b_zero && node.inputs[b_zero] != kNoValue &&
      !graph.IsConstant(node.inputs[b_zero])) {
    constant = false;
  }
  return std::make_unique<IntegerMatMulState>(constant);
}

Status RunDnnlMatMulInteger(const OpContext& ctx, const Node& node, const Inputs& inputs,
                            std::vector<Value>* outputs) {
  const bool to_float = node.op_type == kMatMulIntegerToFloat;
  const KernelFn own = to_float ? RunMatMulIntegerToFloat : RunMatMulInteger;
  auto* state = static_cast<IntegerMatMulState*>(ctx.state);
  const size_t a_zero_index = AZeroIndex(node);
  if (state == nullptr || !state->constant_weights || !FastQLinearConv() ||
      !Covered(inputs, a_zero_index)) {
    return RunReference(own, ctx, node, inputs, outputs);  // it reports what is wrong
  }
  const Value& a = *inputs[0];
  const Value& b = *inputs[1];
  const int64_t k = b.dim(0), n = b.dim(1);
  const int64_t m = k == 0 ? 0 : a.num_elements() / k;
  FloatEpilogue epilogue;
  if (m == 0 || k == 0 || n == 0 || (to_float && !FloatEpilogueOf(node, inputs, n, &epilogue))) {
    return RunReference(own, ctx, node, inputs, outputs);
  }
  const bool per_column = epilogue.scales.size() > 1;
  const bool bias = epilogue.bias != nullptr;
  int32_t a_zero = inputs.size() > a_zero_index && inputs[a_zero_index] != nullptr
                       ? EightBitElement(*inputs[a_zero_index], 0)
                       : 0;
  const bool shifted = b.dtype() == DataType::kUint8;
  const Value* b_zero = inputs.size() > a_zero_index + 1 ? inputs[a_zero_index + 1] : nullptr;
  const int32_t b_shift = shifted ? 128 - (b_zero != nullptr ? EightBitElement(*b_zero, 0) : 0) : 0;
  const memory::data_type a_type =
      a.dtype() == DataType::kInt8 ? memory::data_type::s8 : memory::data_type::u8;
  const int threads = ctx.pool != nullptr ? ctx.pool->usable_threads() : 1;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, m / kMinRowsPerPart));

  const memory::data_type dst_type = to_float ? memory::data_type::f32 : memory::data_type::s32;
  // UNIMPLEMENTED when oneDNN has no kernel for the combination: the own kernel runs it.
  auto build = [&]() -> StatusOr<std::shared_ptr<const MatMulEntry>> {
    try {
      auto entry = std::make_shared<MatMulEntry>();
      dnnl::primitive_attr attr;
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      if (to_float) {
        // The scales as a binary multiply, not runtime output scales: with those oneDNN 2.6
        // leaves its brgemm kernels (AMX, AVX-512 VNNI) for gemm:jit, which took 5x as long.
        dnnl::post_ops post_ops;
        if (shifted) post_ops.append_sum(1.0f);  // the row corrections, put in the destination
        post_ops.append_binary(dnnl::algorithm::binary_mul, RowVectorDesc(per_column ? n : 1));
        if (bias) {
          post_ops.append_binary(dnnl::algorithm::binary_add, RowVectorDesc(n));
        }
        if (epilogue.activation != dnnl::algorithm::undef) {
          post_ops.append_eltwise(1.0f, epilogue.activation, 0.0f, 0.0f);
        }
        attr.set_post_ops(post_ops);
      }
      attr = WithUserScratchpad(attr);
      memory user_weights(memory::desc(Dims({k, n}), memory::data_type::s8, Tag::ab), CpuEngine(),
                          const_cast<int8_t*>(shifted ? state->shifted_weights.Of(b).data<int8_t>()
                                                      : b.data<int8_t>()));
      for (int64_t i = 0; i < parts; ++i) {
        const int64_t first = m * i / parts, rows = m * (i + 1) / parts - first;
        dnnl::matmul::desc desc(memory::desc(Dims({rows, k}), a_type, Tag::ab),
                                memory::desc(Dims({k, n}), memory::data_type::s8, Tag::any),
                                memory::desc(Dims({rows, n}), dst_type, Tag::ab));
        MatMulPart part;
        part.pd = dnnl::matmul::primitive_desc(desc, attr, CpuEngine());
        part.primitive = dnnl::matmul(part.pd);
        part.weights = state->weights.Get(part.pd.weights_desc(), user_weights);
        part.first_row = first;
        entry->parts.push_back(std::move(part));
      }
      return std::shared_ptr<const MatMulEntry>(std::move(entry));
    } catch (const dnnl::error& e) {
      return absl::UnimplementedError(e.what());
    }
  };
  StatusOr<std::shared_ptr<const MatMulEntry>> made =
      state->cache.Get({m, k, n, threads, per_column, bias, shifted}, build);
  if (absl::IsUnimplemented(made.status())) return RunReference(own, ctx, node, inputs, outputs);
  TESSERA_RETURN_IF_ERROR(made.status());
  const std::shared_ptr<const MatMulEntry>& entry = *made;
  Shape out_shape = a.shape();
  out_shape.back() = n;
  Value y = ctx.NewOutput(0, to_float ? DataType::kFp32 : DataType::kInt32, out_shape);
  // INT32 or FP32: four bytes an element either way.
  static_assert(sizeof(int32_t) == sizeof(float));
  char* y_bytes = static_cast<char*>(y.mutable_data<void>());
  const std::string error = RunParts(ctx, entry->parts.size(), threads, [&](size_t i) {
    const MatMulPart& part = entry->parts[i];
    const int64_t rows =
        (i + 1 < entry->parts.size() ? entry->parts[i + 1].first_row : m) - part.first_row;
    std::vector<int32_t> corrections;
    if (shifted) {
      corrections.resize(static_cast<size_t>(rows));
      RowCorrections(a, part.first_row, rows, k, a_zero, b_shift, corrections.data());
      if (to_float) {  // the sum post-op adds them
        float* dst = y.mutable_data<float>() + part.first_row * n;
        for (int64_t r = 0; r < rows; ++r) {
          std::fill(dst + r * n, dst + (r + 1) * n, static_cast<float>(corrections[r]));
        }
      }
    }
    dnnl::stream& stream = ThreadStream();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(part.pd.src_desc(), CpuEngine(),
                              const_cast<uint8_t*>(a.data<uint8_t>()) + part.first_row * k)},
        {DNNL_ARG_WEIGHTS, part.weights},
        {DNNL_ARG_DST, memory(part.pd.dst_desc(), CpuEngine(),
                              y_bytes + part.first_row * n * static_cast<int64_t>(sizeof(float)))},
        {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
         memory(memory::desc(Dims({1}), memory::data_type::s32, Tag::x), CpuEngine(), &a_zero)},
        {DNNL_ARG_SCRATCHPAD, ThreadScratchpad(part.pd.scratchpad_desc())}};
    if (to_float) {
      const int first_binary = shifted ? 1 : 0;  // after the sum post-op
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(first_binary) | DNNL_ARG_SRC_1] =
          memory(RowVectorDesc(static_cast<int64_t>(epilogue.scales.size())), CpuEngine(),
                 const_cast<float*>(epilogue.scales.data()));
      if (bias) {
        args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(first_binary + 1) | DNNL_ARG_SRC_1] =
            memory(RowVectorDesc(n), CpuEngine(), const_cast<float*>(epilogue.bias->data<float>()));
      }
    }
    part.primitive.execute(stream, args);
    stream.wait();
    if (shifted && !to_float) {
      int32_t* dst = y.mutable_data<int32_t>() + part.first_row * n;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) dst[r * n + j] += corrections[r];
      }
    }
  });
  if (!error.empty()) {
    return absl::InternalError(absl::StrCat("oneDNN integer matrix product failed: ", error));
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
