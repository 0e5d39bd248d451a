// QuantizeLinear and DequantizeLinear (opsets 10 and 13): the Q/DQ nodes of a statically
// quantized model (onnxruntime.quantization's QDQ format). The engine computes such a model in
// FP32: DequantizeLinear of constant 8-bit weights folds into FP32 weights at load, and each
// activation's QuantizeLinear -> DequantizeLinear pair rounds it to the 8-bit grid and back, so
// the values are the quantized model's. Also DynamicQuantizeLinear, which quantizes an activation
// over its own range at run time (onnxruntime.quantization's quantize_dynamic).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/integer_gemm.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// x seen as [outer, channels, inner]: channels is x's `axis` dim for a per-axis scale, 1 for a
// per-tensor one.
struct ScaleSpan {
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
};

StatusOr<ScaleSpan> SpanOf(const Node& node, const Value& x, const Value& scale,
                           const Value* zero_point) {
  ScaleSpan span;
  span.inner = x.num_elements();
  if (zero_point != nullptr && zero_point->shape() != scale.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("zero point ", DescribeValue(*zero_point),
                                                   " does not match scale ", DescribeValue(scale)));
  }
  if (scale.shape().empty() ||
      (scale.shape().size() == 1 && scale.num_elements() == 1 && node.opset < 13)) {
    return span;
  }
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  int64_t axis = node.attributes.GetInt("axis", 1);
  if (axis < 0) axis += rank;
  if (scale.shape().size() != 1 || node.opset < 13 || axis < 0 || axis >= rank ||
      scale.shape()[0] != x.shape()[axis]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scale ", DescribeValue(scale), " is neither a scalar nor one value per slice of ",
        DescribeValue(x), " along axis ", node.attributes.GetInt("axis", 1)));
  }
  span.channels = x.shape()[axis];
  span.outer = 1;
  for (int64_t d = 0; d < axis; ++d) span.outer *= x.shape()[d];
  span.inner = span.channels == 0 ? 0 : x.num_elements() / span.outer / span.channels;
  return span;
}

// Calls fn(begin, end, channel) for each run of elements that share a channel, in parallel.
template <typename Fn>
void ForEachChannelRun(ThreadPool* pool, const ScaleSpan& span, Fn fn) {
  if (span.channels == 1) {
    ParallelChunks(pool, span.inner * span.outer,
                   [&](int64_t begin, int64_t end) { fn(begin, end, int64_t{0}); });
    return;
  }
  ParallelChunks(pool, span.outer * span.channels, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      fn(row * span.inner, (row + 1) * span.inner, row % span.channels);
    }
  });
}

// y = clamp(round_half_even(x / s) + z, lo, hi), as ONNX specifies (a division, as onnxruntime
// does too, so the two round alike).
template <typename Q>
void QuantizeRun(const float* x, int64_t n, float s, float z, Q* y) {
  constexpr float lo = std::numeric_limits<Q>::min();
  constexpr float hi = std::numeric_limits<Q>::max();
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(x[i] / s) + z;  // the default rounding mode: half to even
    y[i] = static_cast<Q>(std::fmin(std::fmax(q, lo), hi));
  }
}

// Eight values quantized: round_half_even(v / scale) + zero, clamped to Q and stored.
template <typename Q>
__attribute__((target("avx2"))) inline void QuantizeStore8(__m256 v, __m256 scale, __m256 zero,
                                                           Q* y) {
  const __m256 lo = _mm256_set1_ps(static_cast<float>(std::numeric_limits<Q>::min()));
  const __m256 hi = _mm256_set1_ps(static_cast<float>(std::numeric_limits<Q>::max()));
  v = _mm256_round_ps(_mm256_div_ps(v, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zero), lo), hi);
  const __m256i q = _mm256_cvtps_epi32(v);
  // Already in Q's range, so the saturating packs below only narrow.
  const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i q8 = std::is_signed_v<Q> ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y), q8);
}

// Eight 8-bit values loaded, less their zero point, as floats times the scale.
template <typename Q>
__attribute__((target("avx2"))) inline __m256 DequantizeLoad8(const Q* x, __m256i zero,
                                                              __m256 scale) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x));
  const __m256i wide =
      std::is_signed_v<Q> ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(wide, zero)), scale);
}

// The same eight at a time (libm's nearbyint is a call per element otherwise).
template <typename Q>
__attribute__((target("avx2"))) void QuantizeRunAvx2(const float* x, int64_t n, float s, float z,
                                                     Q* y) {
  const __m256 scale = _mm256_set1_ps(s);
  const __m256 zero = _mm256_set1_ps(z);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) QuantizeStore8(_mm256_loadu_ps(x + i), scale, zero, y + i);
  QuantizeRun(x + i, n - i, s, z, y + i);
}

template <typename Q>
void Quantize(ThreadPool* pool, const ScaleSpan& span, const float* x, const float* scale,
              const Q* zero_point, Q* y) {
  const bool avx2 = CpuHasAvx2();
  ForEachChannelRun(pool, span, [&](int64_t begin, int64_t end, int64_t c) {
    const float z = zero_point != nullptr ? static_cast<float>(zero_point[c]) : 0.0f;
    if (avx2) {
      QuantizeRunAvx2(x + begin, end - begin, scale[c], z, y + begin);
    } else {
      QuantizeRun(x + begin, end - begin, scale[c], z, y + begin);
    }
  });
}

// y = (x - z) * s.
template <typename Q>
void DequantizeRun(const Q* x, int64_t n, float s, int32_t z, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - z) * s;
}

// The same eight at a time, for 8-bit x.
template <typename Q>
__attribute__((target("avx2"))) void DequantizeRunAvx2(const Q* x, int64_t n, float s, int32_t z,
                                                       float* y) {
  const __m256 scale = _mm256_set1_ps(s);
  const __m256i zero = _mm256_set1_epi32(z);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, DequantizeLoad8(x + i, zero, scale));
  DequantizeRun(x + i, n - i, s, z, y + i);
}

template <typename Q>
void Dequantize(ThreadPool* pool, const ScaleSpan& span, const Q* x, const float* scale,
                const Q* zero_point, float* y) {
  const bool avx2 = CpuHasAvx2();
  ForEachChannelRun(pool, span, [&](int64_t begin, int64_t end, int64_t c) {
    const int32_t z = zero_point != nullptr ? static_cast<int32_t>(zero_point[c]) : 0;
    if constexpr (sizeof(Q) == 1) {
      if (avx2) return DequantizeRunAvx2(x + begin, end - begin, scale[c], z, y + begin);
    }
    DequantizeRun(x + begin, end - begin, scale[c], z, y + begin);
  });
}

// min(0, min(x)) and max(0, max(x)), NaNs ignored (as onnxruntime does).
void RangeWithZeroScalar(const float* x, int64_t n, float* lo, float* hi) {
  for (int64_t i = 0; i < n; ++i) {
    *lo = x[i] < *lo ? x[i] : *lo;
    *hi = x[i] > *hi ? x[i] : *hi;
  }
}

__attribute__((target("avx2"))) void RangeWithZeroAvx2(const float* x, int64_t n, float* lo,
                                                       float* hi) {
  // Four independent minima and maxima: one pair would wait out min/max's latency per 8 values.
  __m256 vlo[4], vhi[4];
  for (int j = 0; j < 4; ++j) vlo[j] = vhi[j] = _mm256_setzero_ps();
  int64_t i = 0;
  // min/max_ps return their second operand when the first is NaN, so NaNs drop out.
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * j);
      vlo[j] = _mm256_min_ps(v, vlo[j]);
      vhi[j] = _mm256_max_ps(v, vhi[j]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vlo[0] = _mm256_min_ps(v, vlo[0]);
    vhi[0] = _mm256_max_ps(v, vhi[0]);
  }
  const __m256 l8 = _mm256_min_ps(_mm256_min_ps(vlo[0], vlo[1]), _mm256_min_ps(vlo[2], vlo[3]));
  const __m256 h8 = _mm256_max_ps(_mm256_max_ps(vhi[0], vhi[1]), _mm256_max_ps(vhi[2], vhi[3]));
  float l[8], h[8];
  _mm256_storeu_ps(l, l8);
  _mm256_storeu_ps(h, h8);
  *lo = 0.0f;
  *hi = 0.0f;
  RangeWithZeroScalar(l, 8, lo, hi);
  RangeWithZeroScalar(h, 8, lo, hi);
  RangeWithZeroScalar(x + i, n - i, lo, hi);
}

// x's range widened to include 0, its chunks on the pool.
void RangeWithZero(ThreadPool* pool, const float* x, int64_t n, float* lo, float* hi) {
  const int64_t tasks = std::max<int64_t>(1, n / kElementwiseGrain);
  std::vector<std::pair<float, float>> ranges(static_cast<size_t>(tasks), {0.0f, 0.0f});
  const bool avx2 = CpuHasAvx2();
  auto one = [&](int64_t t) {
    const int64_t begin = n * t / tasks, end = n * (t + 1) / tasks;
    auto& [l, h] = ranges[t];
    if (avx2) {
      RangeWithZeroAvx2(x + begin, end - begin, &l, &h);
    } else {
      RangeWithZeroScalar(x + begin, end - begin, &l, &h);
    }
  };
  if (tasks == 1) {
    one(0);
  } else {
    ParallelFor(pool, tasks, one);
  }
  *lo = *hi = 0.0f;
  for (const auto& [l, h] : ranges) {
    *lo = std::min(*lo, l);
    *hi = std::max(*hi, h);
  }
}

const Value* Optional(const Inputs& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}

// ---- com.microsoft.QLinearAdd ------------------------------------------------------------------

struct AddScales {
  float a = 1, b = 1, c = 1;
  int32_t a_zero = 0, b_zero = 0, c_zero = 0;
};

// c = Q(DQ(a) + DQ(b)) in the FP32 operations of the three nodes it stands for, in their order,
// so that the result is theirs bit for bit.
template <typename A, typename B, typename C>
void QLinearAddRun(const A* a, const B* b, int64_t n, const AddScales& p, C* c) {
  constexpr float lo = std::numeric_limits<C>::min(), hi = std::numeric_limits<C>::max();
  for (int64_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(static_cast<int32_t>(a[i]) - p.a_zero) * p.a;
    const float fb = static_cast<float>(static_cast<int32_t>(b[i]) - p.b_zero) * p.b;
    const float q = std::nearbyint((fa + fb) / p.c) + static_cast<float>(p.c_zero);
    c[i] = static_cast<C>(std::fmin(std::fmax(q, lo), hi));
  }
}

template <typename A, typename B, typename C>
__attribute__((target("avx2"))) void QLinearAddRunAvx2(const A* a, const B* b, int64_t n,
                                                       const AddScales& p, C* c) {
  const __m256 a_scale = _mm256_set1_ps(p.a), b_scale = _mm256_set1_ps(p.b);
  const __m256 c_scale = _mm256_set1_ps(p.c);
  const __m256i a_zero = _mm256_set1_epi32(p.a_zero), b_zero = _mm256_set1_epi32(p.b_zero);
  const __m256 c_zero = _mm256_set1_ps(static_cast<float>(p.c_zero));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 sum = _mm256_add_ps(DequantizeLoad8(a + i, a_zero, a_scale),
                                     DequantizeLoad8(b + i, b_zero, b_scale));
    QuantizeStore8(sum, c_scale, c_zero, c + i);
  }
  QLinearAddRun(a + i, b + i, n - i, p, c + i);
}

template <typename A, typename B, typename C>
void QLinearAddAll(ThreadPool* pool, const Value& a, const Value& b, const AddScales& p, Value* c) {
  const bool avx2 = CpuHasAvx2();
  ParallelChunks(pool, a.num_elements(), [&](int64_t begin, int64_t end) {
    const A* pa = a.data<A>() + begin;
    const B* pb = b.data<B>() + begin;
    C* pc = c->mutable_data<C>() + begin;
    if (avx2) return QLinearAddRunAvx2(pa, pb, end - begin, p, pc);
    QLinearAddRun(pa, pb, end - begin, p, pc);
  });
}

template <typename A, typename B>
void QLinearAddTo(ThreadPool* pool, const Value& a, const Value& b, const AddScales& p, Value* c) {
  if (c->dtype() == DataType::kUint8) return QLinearAddAll<A, B, uint8_t>(pool, a, b, p, c);
  QLinearAddAll<A, B, int8_t>(pool, a, b, p, c);
}

template <typename A>
void QLinearAddFrom(ThreadPool* pool, const Value& a, const Value& b, const AddScales& p,
                    Value* c) {
  if (b.dtype() == DataType::kUint8) return QLinearAddTo<A, uint8_t>(pool, a, b, p, c);
  QLinearAddTo<A, int8_t>(pool, a, b, p, c);
}

// Input `index`, a scale (FP32) or zero point (of `eight_bit`'s type) of one element.
StatusOr<const Value*> OneValue(const Inputs& inputs, size_t index, const char* what,
                                DataType dtype) {
  TESSERA_ASSIGN_OR_RETURN(const Value* v, RequireInput(inputs, index, what, {dtype}));
  if (v->num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", DescribeValue(*v), " must hold one value"));
  }
  return v;
}

}  // namespace

Status RunQLinearAdd(const OpContext& ctx, const Node&, const Inputs& inputs,
                     std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 3, "B", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* c_zero,
                           RequireInput(inputs, 7, "C_zero_point", kEightBitTypes));
  if (a->shape() != b->shape()) {
    return absl::InvalidArgumentError(absl::StrCat("A ", DescribeValue(*a), " and B ",
                                                   DescribeValue(*b), " must have one shape"));
  }
  AddScales p;
  const std::pair<size_t, float*> scales[] = {{1, &p.a}, {4, &p.b}, {6, &p.c}};
  for (const auto& [index, out] : scales) {
    const char* what = index == 1 ? "A_scale" : index == 4 ? "B_scale" : "C_scale";
    TESSERA_ASSIGN_OR_RETURN(const Value* v, OneValue(inputs, index, what, DataType::kFp32));
    *out = v->data<float>()[0];
  }
  TESSERA_ASSIGN_OR_RETURN(const Value* a_zero, OneValue(inputs, 2, "A_zero_point", a->dtype()));
  TESSERA_ASSIGN_OR_RETURN(const Value* b_zero, OneValue(inputs, 5, "B_zero_point", b->dtype()));
  TESSERA_ASSIGN_OR_RETURN(c_zero, OneValue(inputs, 7, "C_zero_point", c_zero->dtype()));
  p.a_zero = EightBitElement(*a_zero, 0);
  p.b_zero = EightBitElement(*b_zero, 0);
  p.c_zero = EightBitElement(*c_zero, 0);
  Value c = ctx.NewOutput(0, c_zero->dtype(), a->shape());
  if (a->dtype() == DataType::kUint8) {
    QLinearAddFrom<uint8_t>(ctx.pool, *a, *b, p, &c);
  } else {
    QLinearAddFrom<int8_t>(ctx.pool, *a, *b, p, &c);
  }
  (*outputs)[0] = std::move(c);
  return absl::OkStatus();
}

Status CheckQuantizeLinear(const Node& node, const Graph&) {
  if (node.attributes.Has("saturate")) {
    return absl::UnimplementedError("QuantizeLinear's saturate attribute (8-bit floats)");
  }
  return absl::OkStatus();
}

Status RunQuantizeLinear(const OpContext& ctx, const Node& node, const Inputs& inputs,
                         std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "x", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* scale,
                           RequireInput(inputs, 1, "y_scale", {DataType::kFp32}));
  const Value* zero_point = Optional(inputs, 2);
  if (zero_point != nullptr && zero_point->dtype() != DataType::kUint8 &&
      zero_point->dtype() != DataType::kInt8) {
    return absl::UnimplementedError(absl::StrCat("y_zero_point ", DescribeValue(*zero_point),
                                                 ": only UINT8 and INT8 are supported"));
  }
  TESSERA_ASSIGN_OR_RETURN(ScaleSpan span, SpanOf(node, *x, *scale, zero_point));
  const DataType type = zero_point != nullptr ? zero_point->dtype() : DataType::kUint8;
  Value y = ctx.NewOutput(0, type, x->shape());
  if (type == DataType::kUint8) {
    Quantize<uint8_t>(ctx.pool, span, x->data<float>(), scale->data<float>(),
                      zero_point != nullptr ? zero_point->data<uint8_t>() : nullptr,
                      y.mutable_data<uint8_t>());
  } else {
    Quantize<int8_t>(ctx.pool, span, x->data<float>(), scale->data<float>(),
                     zero_point->data<int8_t>(), y.mutable_data<int8_t>());
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

// DynamicQuantizeLinear (opset 11): x to UINT8 over x's range widened to include 0,
//   y_scale = (max(0, max(x)) - min(0, min(x))) / 255
//   y_zero_point = round_half_even(clamp(0 - min(0, min(x)) / y_scale, 0, 255))
//   y = saturate(round_half_even(x / y_scale) + y_zero_point)
// in FP32, as the ONNX spec and onnxruntime compute them. An all-zero (or empty) x has no range:
// its scale is 1 and its zero point 0, as onnxruntime gives.
Status RunDynamicQuantizeLinear(const OpContext& ctx, const Node&, const Inputs& inputs,
                                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "x", {DataType::kFp32}));
  float lo = 0.0f, hi = 0.0f;
  RangeWithZero(ctx.pool, x->data<float>(), x->num_elements(), &lo, &hi);
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zero = std::nearbyint(std::fmin(std::fmax(0.0f - lo / scale, 0.0f), 255.0f));
  const uint8_t zero_point = static_cast<uint8_t>(zero);
  Value y = ctx.NewOutput(0, DataType::kUint8, x->shape());
  ScaleSpan span;
  span.inner = x->num_elements();
  Quantize<uint8_t>(ctx.pool, span, x->data<float>(), &scale, &zero_point,
                    y.mutable_data<uint8_t>());
  (*outputs)[0] = std::move(y);
  if (outputs->size() > 1) {
    Value s = ctx.NewOutput(1, DataType::kFp32, {});
    s.mutable_data<float>()[0] = scale;
    (*outputs)[1] = std::move(s);
  }
  if (outputs->size() > 2) {
    Value z = ctx.NewOutput(2, DataType::kUint8, {});
    z.mutable_data<uint8_t>()[0] = zero_point;
    (*outputs)[2] = std::move(z);
  }
  return absl::OkStatus();
}

Status RunDequantizeLinear(const OpContext& ctx, const Node& node, const Inputs& inputs,
                           std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      RequireInput(inputs, 0, "x", {DataType::kUint8, DataType::kInt8, DataType::kInt32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* scale,
                           RequireInput(inputs, 1, "x_scale", {DataType::kFp32}));
  const Value* zero_point = Optional(inputs, 2);
  if (zero_point != nullptr && zero_point->dtype() != x->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("x_zero_point ", DescribeValue(*zero_point),
                                                   " is not of x's type (", DescribeValue(*x),
                                                   ")"));
  }
  TESSERA_ASSIGN_OR_RETURN(ScaleSpan span, SpanOf(node, *x, *scale, zero_point));
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  const float* s = scale->data<float>();
  float* out = y.mutable_data<float>();
  switch (x->dtype()) {
    case DataType::kUint8:
      Dequantize<uint8_t>(ctx.pool, span, x->data<uint8_t>(), s,
                          zero_point != nullptr ? zero_point->data<uint8_t>() : nullptr, out);
      break;
    case DataType::kInt8:
      Dequantize<int8_t>(ctx.pool, span, x->data<int8_t>(), s,
                         zero_point != nullptr ? zero_point->data<int8_t>() : nullptr, out);
      break;
    default:  // INT32 (quantized biases): ONNX gives them no zero point but 0
      Dequantize<int32_t>(ctx.pool, span, x->data<int32_t>(), s,
                          zero_point != nullptr ? zero_point->data<int32_t>() : nullptr, out);
      break;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
