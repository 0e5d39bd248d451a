// Gemm and MatMul ops on top of Sgemm, and the epilogue FuseMatMulEpilogues gives a MatMul.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/fast_math.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

enum class Activation { kNone, kGelu, kGeluTanh };

// rows x n floats at `out`: += bias[n] (when not null), then GELU as the absorbed nodes computed
// it: erf form x/2 * (1 + erf(x / sqrt 2)), or tanh form x/2 * (1 + tanh(sqrt(2/pi) * (x +
// 0.044715 x^3))) with tanh(z) = 1 - 2 / (e^2z + 1). Compiled for AVX-512 and AVX2 as well as the
// baseline: this loop is as long as the product (AVX-512 made bert_tiny at batch 8 5 % faster).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void EpilogueRows(float* out, int64_t rows, int64_t n, const float* bias, Activation activation) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * n;
    if (bias != nullptr) {
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
    if (activation == Activation::kGelu) {
      for (int64_t j = 0; j < n; ++j) {
        row[j] = 0.5f * row[j] * (1.0f + FastErf(row[j] * 0.70710678118654752f));
      }
    } else if (activation == Activation::kGeluTanh) {
      for (int64_t j = 0; j < n; ++j) {
        const float x = row[j];
        const float z = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        const float tanh_z = 1.0f - 2.0f / (FastExp(2.0f * z) + 1.0f);
        row[j] = 0.5f * x * (1.0f + tanh_z);
      }
    }
  }
}

}  // namespace

// One pass over the product where the absorbed nodes made up to ten (graph_passes.h
// FuseMatMulEpilogues).
Status ApplyMatMulEpilogue(const OpContext& ctx, const Node& node, const Value* bias, Value* y) {
  const std::string name = node.attributes.GetString("tessera_activation", "");
  Activation activation = Activation::kNone;
  if (name == "Gelu") {
    activation = Activation::kGelu;
  } else if (name == "GeluTanh") {
    activation = Activation::kGeluTanh;
  } else if (!name.empty()) {
    return absl::UnimplementedError(absl::StrCat("MatMul activation \"", name, "\""));
  }
  const int64_t n = y->rank() > 0 ? y->dim(y->rank() - 1) : 1;
  if (bias != nullptr && (bias->dtype() != DataType::kFp32 || bias->num_elements() != n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bias ", DescribeValue(*bias), " does not match the product's last dim of ", n));
  }
  const int64_t rows = n > 0 ? y->num_elements() / n : 0;
  if ((bias == nullptr && activation == Activation::kNone) || rows == 0) return absl::OkStatus();
  float* out = y->mutable_data<float>();
  const float* b = bias != nullptr ? bias->data<float>() : nullptr;
  // Whole rows per task, about kElementwiseGrain elements each, so the bias index is the column.
  const int64_t tasks = std::clamp<int64_t>(y->num_elements() / kElementwiseGrain, 1, rows);
  ParallelFor(ctx.pool, tasks, [&](int64_t t) {
    const int64_t begin = rows * t / tasks, end = rows * (t + 1) / tasks;
    EpilogueRows(out + begin * n, end - begin, n, b, activation);
  });
  return absl::OkStatus();
}

Status CheckMatMul(const Node& node, const Graph&) {
  if (node.inputs.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatMul takes 2 inputs, the node has ", node.inputs.size()));
  }
  for (const char* internal : {"tessera_activation", "tessera_scale"}) {
    if (node.attributes.Has(internal)) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute ", internal, " is the engine's own, set by its graph passes"));
    }
  }
  return absl::OkStatus();
}

Status RunGemm(const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {DataType::kFp32}));
  if (a->rank() != 2 || b->rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("A and B must be 2-D, got ", DescribeValue(*a),
                                                   " and ", DescribeValue(*b)));
  }
  bool trans_a = node.attributes.GetInt("transA", 0) != 0;
  bool trans_b = node.attributes.GetInt("transB", 0) != 0;
  float alpha = node.attributes.GetFloat("alpha", 1.0f);
  float beta = node.attributes.GetFloat("beta", 1.0f);
  int64_t m = trans_a ? a->dim(1) : a->dim(0);
  int64_t k = trans_a ? a->dim(0) : a->dim(1);
  int64_t kb = trans_b ? b->dim(1) : b->dim(0);
  int64_t n = trans_b ? b->dim(0) : b->dim(1);
  if (k != kb) {
    return absl::InvalidArgumentError(absl::StrCat("inner dims differ: A ", DescribeValue(*a),
                                                   " and B ", DescribeValue(*b)));
  }
  Value y = ctx.NewOutput(0, DataType::kFp32, {m, n});
  float* out = y.mutable_data<float>();
  const Value* c = inputs.size() > 2 ? inputs[2] : nullptr;
  float gemm_beta = 0.0f;
  if (c != nullptr && beta != 0.0f) {
    if (c->dtype() != DataType::kFp32) return absl::InvalidArgumentError("C must be FLOAT");
    // C broadcasts one way, to [m, n]; fill Y with it and let Sgemm accumulate on top.
    if (c->rank() > 2) return absl::InvalidArgumentError("C must have rank <= 2");
    int64_t cm = c->rank() == 2 ? c->dim(0) : 1;
    int64_t cn = c->rank() >= 1 ? c->dim(c->rank() - 1) : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n)) {
      return absl::InvalidArgumentError(absl::StrCat("C ", DescribeValue(*c),
                                                     " does not broadcast to [", m, ", ", n, "]"));
    }
    const float* cd = c->data<float>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        out[i * n + j] = beta * cd[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
      }
    }
    gemm_beta = 1.0f;
  }
  Sgemm(trans_a, trans_b, m, n, k, alpha, a->data<float>(), a->dim(1), b->data<float>(), b->dim(1),
        gemm_beta, out, n, ctx.pool, ctx.onednn);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

StatusOr<MatMulDims> MatMulDimsOf(const Value& a, const Value& b) {
  if (a.rank() == 0 || b.rank() == 0) {
    return absl::InvalidArgumentError("a matrix product of a scalar");
  }
  // Numpy semantics: a 1-D A is a row vector, a 1-D B a column vector; the added dim is dropped
  // from the result.
  Shape sa = a.shape(), sb = b.shape();
  const bool a_vector = sa.size() == 1, b_vector = sb.size() == 1;
  if (a_vector) sa.insert(sa.begin(), 1);
  if (b_vector) sb.push_back(1);
  MatMulDims d;
  d.m = sa[sa.size() - 2];
  d.k = sa.back();
  d.n = sb.back();
  if (sb[sb.size() - 2] != d.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("inner dims differ: A ", DescribeValue(a), " and B ", DescribeValue(b)));
  }
  d.batch_a.assign(sa.begin(), sa.end() - 2);
  d.batch_b.assign(sb.begin(), sb.end() - 2);
  TESSERA_ASSIGN_OR_RETURN(d.batch, BroadcastShapes(d.batch_a, d.batch_b));
  d.out = d.batch;
  if (!a_vector) d.out.push_back(d.m);
  if (!b_vector) d.out.push_back(d.n);
  return d;
}

int64_t MatrixOffset(const Shape& batch, const Shape& own, int64_t index) {
  int64_t off = 0, stride = 1;
  for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
    const int64_t coord = index % batch[d];
    index /= batch[d];
    const int od = d - static_cast<int>(batch.size() - own.size());
    if (od >= 0) {
      if (own[od] != 1) off += coord * stride;
      stride *= own[od];
    }
  }
  return off;
}

Status RunMatMul(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const MatMulDims d, MatMulDimsOf(*a, *b));
  const int64_t m = d.m, k = d.k, n = d.n;
  const Shape &batch = d.batch, &batch_a = d.batch_a, &batch_b = d.batch_b;
  Value y = ctx.NewOutput(0, DataType::kFp32, d.out);
  const float* ad = a->data<float>();
  const float* bd = b->data<float>();
  float* yd = y.mutable_data<float>();

  // A scale FuseMatMulScale took from a Div or Mul by a constant after the product (attention's
  // 1/sqrt(d)): the GEMM's alpha.
  const float alpha = node.attributes.GetFloat("tessera_scale", 1.0f);
  int64_t batch_count = ElementCount(batch);
  if (batch_b.empty() && batch_a == batch) {
    // [.., m, k] x [k, n]: all of A's rows in one GEMM, which tiles and threads better.
    Sgemm(false, false, batch_count * m, n, k, alpha, ad, k, bd, n, 0.0f, yd, n, ctx.pool,
          ctx.onednn);
  } else {
    auto one = [&](int64_t i, ThreadPool* pool) {
      Sgemm(false, false, m, n, k, alpha, ad + MatrixOffset(batch, batch_a, i) * m * k, k,
            bd + MatrixOffset(batch, batch_b, i) * k * n, n, 0.0f, yd + i * m * n, n, pool,
            ctx.onednn);
    };
    const int threads = ctx.pool != nullptr ? ctx.pool->usable_threads() : 1;
    if (threads > 1 && batch_count >= threads) {
      // Many small products (attention heads): one per thread beats threading each one.
      ParallelFor(ctx.pool, batch_count, [&](int64_t i) { one(i, nullptr); });
    } else {
      for (int64_t i = 0; i < batch_count; ++i) one(i, ctx.pool);
    }
  }
  // Input 2 and the activation exist only on MatMuls the graph passes fused (CheckMatMul refuses
  // them in a model file).
  if (inputs.size() > 2 || node.attributes.Has("tessera_activation")) {
    TESSERA_RETURN_IF_ERROR(
        ApplyMatMulEpilogue(ctx, node, inputs.size() > 2 ? inputs[2] : nullptr, &y));
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
