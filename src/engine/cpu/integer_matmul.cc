// MatMulInteger and QLinearMatMul (ONNX opset 10): products of 8-bit matrices summed exactly in
// INT32 (integer_gemm.h), numpy-batched as MatMul is. MatMulInteger is what
// onnxruntime.quantization's quantize_dynamic makes of a MatMul: its INT32 result is cast to FP32
// and scaled by the model's own nodes, which FuseIntegerToFloat folds into one
// kMatMulIntegerToFloat node (graph.h). QLinearMatMul requantizes to 8 bits itself.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/integer_gemm.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

double ElementAsDouble(const Value& v, int64_t i) {
  switch (v.dtype()) {
    case DataType::kUint8:
    case DataType::kInt8:
      return EightBitElement(v, i);
    default:
      return v.data<float>()[i];
  }
}

// A scale or zero point of operand `x`, given per tensor (one value), per row of A / column of B
// for all of the operand's matrices ([M] / [N]), or per row / column of each matrix (x's shape
// with its last dim (A) or next-to-last dim (B) 1), expanded to one value per row of A's matrices
// or column of B's, in their order.
StatusOr<std::vector<double>> PerLineValues(const Value& v, const Value& x, bool rows,
                                            int64_t matrices, int64_t lines, const char* what) {
  std::vector<double> out(static_cast<size_t>(matrices * lines));
  if (v.num_elements() == 1 && v.rank() <= 1) {
    std::fill(out.begin(), out.end(), ElementAsDouble(v, 0));
    return out;
  }
  if (v.rank() == 1 && v.dim(0) == lines) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = ElementAsDouble(v, i % lines);
    return out;
  }
  Shape each = x.shape();
  if (each.size() >= 2) each[each.size() - (rows ? 1 : 2)] = 1;
  if (x.rank() >= 2 && v.shape() == each) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = ElementAsDouble(v, i);
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, " ", DescribeValue(v), " is neither a scalar nor one value per ",
      rows ? "row of A (" : "column of B (", lines, ")", x.rank() > 2 ? " of each matrix" : ""));
}

std::vector<int32_t> AsInt32(const std::vector<double>& v) {
  return std::vector<int32_t>(v.begin(), v.end());
}

// A zero point input: absent (0), or of its operand's 8-bit type.
StatusOr<std::vector<int32_t>> ZeroPoints(const Inputs& inputs, size_t index, const Value& x,
                                          bool rows, int64_t matrices, int64_t lines,
                                          const char* what) {
  if (index >= inputs.size() || inputs[index] == nullptr) {
    return std::vector<int32_t>(static_cast<size_t>(matrices * lines), 0);
  }
  TESSERA_ASSIGN_OR_RETURN(const Value* v, RequireInput(inputs, index, what, kEightBitTypes));
  if (v->dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", DescribeValue(*v), " is not of its operand's type (", DescribeValue(x), ")"));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> values,
                           PerLineValues(*v, x, rows, matrices, lines, what));
  return AsInt32(values);
}

template <typename Q>
void WidenA(const Value& a, const MatMulDims& d, const std::vector<int32_t>& zero, Int16Rows* out) {
  WidenRows(a.data<Q>(), 0, out->rows, d.k, 1, zero.data(), 0, out, 0);
}

// B's matrices [K, N] as rows of K: element (n, k) of matrix j at j * K * N + k * N + n.
template <typename Q>
void WidenB(const Value& b, const MatMulDims& d, int64_t matrices, const std::vector<int32_t>& zero,
            Int16Rows* out) {
  for (int64_t j = 0; j < matrices; ++j) {
    WidenRows(b.data<Q>() + j * d.k * d.n, 0, d.n, 1, d.n, zero.data() + j * d.n, 0, out, j * d.n);
  }
}

struct IntegerProduct {
  MatMulDims dims;
  int64_t matrices_a = 1, matrices_b = 1;
};

// acc[batch, M, N] = the products of (A - a_zero) and (B - b_zero).
void MultiplyIntegers(const OpContext& ctx, const Value& a, const Value& b,
                      const std::vector<int32_t>& a_zero, const std::vector<int32_t>& b_zero,
                      const IntegerProduct& p, int32_t* acc) {
  const MatMulDims& d = p.dims;
  Int16Rows wa, wb;
  wa.Resize(p.matrices_a * d.m, d.k);
  wb.Resize(p.matrices_b * d.n, d.k);
  if (a.dtype() == DataType::kUint8) {
    WidenA<uint8_t>(a, d, a_zero, &wa);
  } else {
    WidenA<int8_t>(a, d, a_zero, &wa);
  }
  if (b.dtype() == DataType::kUint8) {
    WidenB<uint8_t>(b, d, p.matrices_b, b_zero, &wb);
  } else {
    WidenB<int8_t>(b, d, p.matrices_b, b_zero, &wb);
  }
  const int64_t batch = ElementCount(d.batch);
  if (d.batch_b.empty() && d.batch_a == d.batch) {
    // [.., M, K] x [K, N]: every row of A against B at once.
    Int16RowDots(wa.All(), wb.All(), acc, d.n, ctx.pool);
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t ia = MatrixOffset(d.batch, d.batch_a, i);
    const int64_t ib = MatrixOffset(d.batch, d.batch_b, i);
    Int16RowDots(wa.Span(ia * d.m, d.m), wb.Span(ib * d.n, d.n), acc + i * d.m * d.n, d.n,
                 ctx.pool);
  }
}

StatusOr<IntegerProduct> ProductOf(const Value& a, const Value& b) {
  IntegerProduct p;
  TESSERA_ASSIGN_OR_RETURN(p.dims, MatMulDimsOf(a, b));
  p.matrices_a = ElementCount(p.dims.batch_a);
  p.matrices_b = ElementCount(p.dims.batch_b);
  return p;
}

// Row r of the product's matrix `i` reads row MatrixOffset(.., i) * M + r of A's expanded values;
// column c reads column MatrixOffset(.., i) * N + c of B's.
int64_t LineIndex(const MatMulDims& d, const Shape& own, int64_t matrix, int64_t lines,
                  int64_t line) {
  return MatrixOffset(d.batch, own, matrix) * lines + line;
}

template <typename Q>
void Requantize(const IntegerProduct& p, const int32_t* acc, const std::vector<double>& a_scale,
                const std::vector<double>& b_scale, float y_scale, int32_t y_zero, Q* y) {
  constexpr float lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  const MatMulDims& d = p.dims;
  const int64_t batch = ElementCount(d.batch);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < d.m; ++r) {
      const float sa = static_cast<float>(a_scale[LineIndex(d, d.batch_a, i, d.m, r)]);
      const int64_t out_row = (i * d.m + r) * d.n;
      for (int64_t c = 0; c < d.n; ++c) {
        // In FP32, as onnxruntime requantizes: acc * (a_scale * b_scale / y_scale), rounded half
        // to even, plus the zero point.
        const float multiplier =
            sa * static_cast<float>(b_scale[LineIndex(d, d.batch_b, i, d.n, c)]) / y_scale;
        const float q = std::nearbyint(static_cast<float>(acc[out_row + c]) * multiplier) + y_zero;
        y[out_row + c] = static_cast<Q>(std::fmin(std::fmax(q, lo), hi));
      }
    }
  }
}

}  // namespace

Status RunMatMulInteger(const OpContext& ctx, const Node&, const Inputs& inputs,
                        std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(IntegerProduct p, ProductOf(*a, *b));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> a_zero,
                           ZeroPoints(inputs, 2, *a, true, p.matrices_a, p.dims.m, "a_zero_point"));
  TESSERA_ASSIGN_OR_RETURN(
      std::vector<int32_t> b_zero,
      ZeroPoints(inputs, 3, *b, false, p.matrices_b, p.dims.n, "b_zero_point"));
  Value y = ctx.NewOutput(0, DataType::kInt32, p.dims.out);
  MultiplyIntegers(ctx, *a, *b, a_zero, b_zero, p, y.mutable_data<int32_t>());
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunQLinearMatMul(const OpContext& ctx, const Node&, const Inputs& inputs,
                        std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "a", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* a_scale,
                           RequireInput(inputs, 1, "a_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 3, "b", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* b_scale,
                           RequireInput(inputs, 4, "b_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* y_scale,
                           RequireInput(inputs, 6, "y_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* y_zero,
                           RequireInput(inputs, 7, "y_zero_point", kEightBitTypes));
  if (y_scale->num_elements() != 1 || y_zero->num_elements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("y_scale ", DescribeValue(*y_scale),
                                                   " and y_zero_point ", DescribeValue(*y_zero),
                                                   " must each hold one value"));
  }
  const float ys = y_scale->data<float>()[0];
  if (!(ys > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("y_scale (", ys, ") must be positive"));
  }
  TESSERA_ASSIGN_OR_RETURN(IntegerProduct p, ProductOf(*a, *b));
  // The zero points are required inputs here (QLinearMatMul has no defaults).
  TESSERA_RETURN_IF_ERROR(RequireInput(inputs, 2, "a_zero_point", kEightBitTypes).status());
  TESSERA_RETURN_IF_ERROR(RequireInput(inputs, 5, "b_zero_point", kEightBitTypes).status());
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> a_zero,
                           ZeroPoints(inputs, 2, *a, true, p.matrices_a, p.dims.m, "a_zero_point"));
  TESSERA_ASSIGN_OR_RETURN(
      std::vector<int32_t> b_zero,
      ZeroPoints(inputs, 5, *b, false, p.matrices_b, p.dims.n, "b_zero_point"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> sa,
                           PerLineValues(*a_scale, *a, true, p.matrices_a, p.dims.m, "a_scale"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> sb,
                           PerLineValues(*b_scale, *b, false, p.matrices_b, p.dims.n, "b_scale"));
  std::vector<int32_t> acc(static_cast<size_t>(ElementCount(p.dims.out)));
  MultiplyIntegers(ctx, *a, *b, a_zero, b_zero, p, acc.data());
  Value y = ctx.NewOutput(0, y_zero->dtype(), p.dims.out);
  const auto zero = static_cast<int32_t>(ElementAsDouble(*y_zero, 0));
  if (y_zero->dtype() == DataType::kUint8) {
    Requantize(p, acc.data(), sa, sb, ys, zero, y.mutable_data<uint8_t>());
  } else {
    Requantize(p, acc.data(), sa, sb, ys, zero, y.mutable_data<int8_t>());
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

bool OneOrOnePerLastDim(const Value& v, int64_t n) {
  if (v.num_elements() == 1) return true;
  return v.rank() >= 1 && v.dim(v.rank() - 1) == n && v.num_elements() == n;
}

Status RunMatMulIntegerToFloat(const OpContext& ctx, const Node& node, const Inputs& inputs,
                               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* a_scale,
                           RequireInput(inputs, 2, "a_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* b_scale,
                           RequireInput(inputs, 3, "b_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(IntegerProduct p, ProductOf(*a, *b));
  const int64_t n = p.dims.n;
  // onnxruntime's schema also allows a_scale and a_zero_point per column of A, which the integer
  // product cannot factor out; its own kernel takes one value too.
  const Value* a_zero_point = inputs.size() > 4 ? inputs[4] : nullptr;
  for (const Value* v : {a_scale, a_zero_point}) {
    if (v != nullptr && v->num_elements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(v == a_scale ? "a_scale " : "a_zero_point ", DescribeValue(*v),
                       " must hold one value (per-column values of A are not supported)"));
    }
  }
  if (!OneOrOnePerLastDim(*b_scale, n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("b_scale ", DescribeValue(*b_scale),
                     " is neither one value nor one per column of B (", n, ")"));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> a_zero,
                           ZeroPoints(inputs, 4, *a, true, p.matrices_a, p.dims.m, "a_zero_point"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> b_zero,
                           ZeroPoints(inputs, 5, *b, false, p.matrices_b, n, "b_zero_point"));
  const Value* bias = inputs.size() > 6 ? inputs[6] : nullptr;
  // The scales' product in FP32, as the Mul nodes the fusion replaced computed it.
  std::vector<float> scale(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    scale[j] =
        a_scale->data<float>()[0] * b_scale->data<float>()[b_scale->num_elements() == 1 ? 0 : j];
  }
  std::vector<int32_t> acc(static_cast<size_t>(ElementCount(p.dims.out)));
  MultiplyIntegers(ctx, *a, *b, a_zero, b_zero, p, acc.data());
  Value y = ctx.NewOutput(0, DataType::kFp32, p.dims.out);
  float* out = y.mutable_data<float>();
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]) * scale[i % n];
  TESSERA_RETURN_IF_ERROR(ApplyMatMulEpilogue(ctx, node, bias, &y));
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
