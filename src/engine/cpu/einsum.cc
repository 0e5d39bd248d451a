// Einsum (opset 12+), FP32, any number of operands. Products of two operands in which every label
// is a batch label (both operands and the output), a row or column label (one operand and the
// output) or a contracted label (both operands, not the output), and none repeats within an
// operand, run as batched Sgemm on copies laid out [batch, m, k] and [batch, k, n]: the attention
// products of transformer exports ("bhqd,bhkd->bhqk") and plain matrix products. Everything else
// (diagonals, sums over one operand's label, three operands, broadcast ellipsis dims) takes a
// direct loop over every label combination.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Labels: 'A'-'Z' are 0-25, 'a'-'z' 26-51, an ellipsis's dims 52 and up (right-aligned across the
// operands, as numpy broadcasts them).
constexpr int kEllipsisBase = 52;

int LetterLabel(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

std::string LabelName(int label) {
  if (label < 26) return std::string(1, static_cast<char>('A' + label));
  if (label < kEllipsisBase) return std::string(1, static_cast<char>('a' + label - 26));
  return "...";
}

// One term's labels, with the ellipsis (if any) kept as a marker (-1) until its width is known.
StatusOr<std::vector<int>> ParseTerm(const std::string& term) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0) {
      if (ellipsis) {
        return absl::InvalidArgumentError(absl::StrCat("term \"", term, "\" has two ellipses"));
      }
      ellipsis = true;
      labels.push_back(-1);
      i += 2;
      continue;
    }
    const int label = LetterLabel(term[i]);
    if (label < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("term \"", term, "\" has '", std::string(1, term[i]), "', not a letter"));
    }
    labels.push_back(label);
  }
  return labels;
}

// Replaces the ellipsis marker with labels for `width` dims, right-aligned among `max_width`.
std::vector<int> ExpandEllipsis(const std::vector<int>& term, int width, int max_width) {
  std::vector<int> out;
  for (int label : term) {
    if (label >= 0) {
      out.push_back(label);
      continue;
    }
    for (int j = 0; j < width; ++j) out.push_back(kEllipsisBase + max_width - width + j);
  }
  return out;
}

struct EinsumPlan {
  std::vector<std::vector<int>> operands;  // per operand, its label per dim
  std::vector<int> output;                 // label per output dim
  std::vector<int64_t> size;               // per label; 1 for an unused one
  std::vector<bool> used;                  // per label: named by some operand
};

StatusOr<EinsumPlan> PlanEinsum(std::string equation, const Inputs& inputs) {
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    TESSERA_ASSIGN_OR_RETURN(std::vector<int> t, ParseTerm(lhs.substr(start, comma - start)));
    terms.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("equation \"", equation, "\" has ", terms.size(),
                                                   " terms for ", inputs.size(), " inputs"));
  }
  EinsumPlan plan;
  std::vector<int> widths;
  int max_width = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const int letters = static_cast<int>(
        std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l >= 0; }));
    const bool has_ellipsis = letters != static_cast<int>(terms[i].size());
    const int rank = inputs[i]->rank();
    const int width = rank - letters;
    if (width < 0 || (!has_ellipsis && width != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "term ", i, " of \"", equation, "\" does not fit ", DescribeValue(*inputs[i])));
    }
    widths.push_back(width);
    max_width = std::max(max_width, width);
  }
  constexpr int64_t kUnset = -1;
  plan.size.assign(static_cast<size_t>(kEllipsisBase + max_width), kUnset);
  std::vector<int> count(plan.size.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    plan.operands.push_back(ExpandEllipsis(terms[i], widths[i], max_width));
    const std::vector<int>& labels = plan.operands.back();
    for (size_t d = 0; d < labels.size(); ++d) {
      const int64_t dim = inputs[i]->dim(static_cast<int>(d));
      int64_t& size = plan.size[static_cast<size_t>(labels[d])];
      ++count[static_cast<size_t>(labels[d])];
      // Ellipsis dims broadcast as numpy's do; letters must agree exactly.
      const bool broadcast = labels[d] >= kEllipsisBase && (size == 1 || dim == 1);
      if (size != kUnset && size != dim && !broadcast) {
        return absl::InvalidArgumentError(
            absl::StrCat("dim ", d, " of input ", i, " ", DescribeValue(*inputs[i]),
                         " does not match the other dims labelled '", LabelName(labels[d]), "'"));
      }
      if (size == kUnset || size == 1) size = dim;
    }
  }
  plan.used.resize(plan.size.size());
  for (size_t l = 0; l < plan.size.size(); ++l) {
    plan.used[l] = count[l] > 0;
    if (!plan.used[l]) plan.size[l] = 1;
  }
  if (arrow != std::string::npos) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int> out, ParseTerm(equation.substr(arrow + 2)));
    plan.output = ExpandEllipsis(out, max_width, max_width);
    std::vector<bool> seen(plan.size.size(), false);
    for (int label : plan.output) {
      if (count[static_cast<size_t>(label)] == 0 || seen[static_cast<size_t>(label)]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the output of \"", equation, "\" names a label twice or one no input has"));
      }
      seen[static_cast<size_t>(label)] = true;
    }
  } else {
    // Implicit output: the ellipsis dims, then the letters used once, in alphabetical order.
    for (int j = 0; j < max_width; ++j) plan.output.push_back(kEllipsisBase + j);
    for (int label = 0; label < kEllipsisBase; ++label) {
      if (count[static_cast<size_t>(label)] == 1) plan.output.push_back(label);
    }
  }
  return plan;
}

// Per-label element strides of operand `labels` over a tensor of `shape` (repeated labels add up:
// a diagonal; size-1 dims broadcast with stride 0).
std::vector<int64_t> LabelStrides(const std::vector<int>& labels, const Shape& shape,
                                  size_t label_count) {
  std::vector<int64_t> strides(label_count, 0);
  int64_t stride = 1;
  for (size_t d = labels.size(); d-- > 0;) {
    if (shape[d] != 1) strides[static_cast<size_t>(labels[d])] += stride;
    stride *= shape[d];
  }
  return strides;
}

// Copies `src` into a contiguous tensor whose dims are `order` (labels), reading each through
// `strides` (per label).
void GatherByLabels(const float* src, const std::vector<int>& order,
                    const std::vector<int64_t>& strides, const std::vector<int64_t>& size,
                    float* dst) {
  int64_t total = 1;
  for (int l : order) total *= size[static_cast<size_t>(l)];
  std::vector<int64_t> index(order.size(), 0);
  int64_t offset = 0;
  for (int64_t e = 0; e < total; ++e) {
    dst[e] = src[offset];
    for (size_t d = order.size(); d-- > 0;) {
      const size_t l = static_cast<size_t>(order[d]);
      offset += strides[l];
      if (++index[d] < size[l]) break;
      offset -= strides[l] * size[l];
      index[d] = 0;
    }
  }
}

// The batched-GEMM form of a two-operand product, when the labels allow it (see the top).
bool TryBatchedGemm(const EinsumPlan& plan, const Value& a, const Value& b, float* out,
                    const OpContext& ctx) {
  const size_t n_labels = plan.size.size();
  std::vector<int> in_a(n_labels, 0), in_b(n_labels, 0), in_out(n_labels, 0);
  for (int l : plan.operands[0]) ++in_a[static_cast<size_t>(l)];
  for (int l : plan.operands[1]) ++in_b[static_cast<size_t>(l)];
  for (int l : plan.output) ++in_out[static_cast<size_t>(l)];
  std::vector<int> batch, rows, cols, inner;
  for (size_t l = 0; l < n_labels; ++l) {
    if (in_a[l] > 1 || in_b[l] > 1) return false;
    const int label = static_cast<int>(l);
    if (in_a[l] && in_b[l]) {
      (in_out[l] ? batch : inner).push_back(label);
    } else if (in_a[l] || in_b[l]) {
      if (!in_out[l]) return false;  // summed over one operand only
      (in_a[l] ? rows : cols).push_back(label);
    }
  }
  // Broadcast ellipsis dims (a size-1 dim against a larger one) need the general loop.
  for (size_t i = 0; i < 2; ++i) {
    const Value& v = i == 0 ? a : b;
    for (size_t d = 0; d < plan.operands[i].size(); ++d) {
      if (v.dim(static_cast<int>(d)) != plan.size[static_cast<size_t>(plan.operands[i][d])]) {
        return false;
      }
    }
  }
  auto product = [&](const std::vector<int>& labels) {
    int64_t p = 1;
    for (int l : labels) p *= plan.size[static_cast<size_t>(l)];
    return p;
  };
  const int64_t nb = product(batch), m = product(rows), n = product(cols), k = product(inner);
  if (k == 0) {  // an empty contraction
    std::fill_n(out, nb * m * n, 0.0f);
    return true;
  }
  std::vector<int> a_order = batch, b_order = batch, c_order = batch;
  a_order.insert(a_order.end(), rows.begin(), rows.end());
  a_order.insert(a_order.end(), inner.begin(), inner.end());
  b_order.insert(b_order.end(), inner.begin(), inner.end());
  b_order.insert(b_order.end(), cols.begin(), cols.end());
  c_order.insert(c_order.end(), rows.begin(), rows.end());
  c_order.insert(c_order.end(), cols.begin(), cols.end());
  std::vector<float> a_copy(static_cast<size_t>(nb * m * k)),
      b_copy(static_cast<size_t>(nb * k * n));
  GatherByLabels(a.data<float>(), a_order, LabelStrides(plan.operands[0], a.shape(), n_labels),
                 plan.size, a_copy.data());
  GatherByLabels(b.data<float>(), b_order, LabelStrides(plan.operands[1], b.shape(), n_labels),
                 plan.size, b_copy.data());
  const bool direct = c_order == plan.output;
  std::vector<float> c_copy(direct ? 0 : static_cast<size_t>(nb * m * n));
  float* c = direct ? out : c_copy.data();
  for (int64_t i = 0; i < nb; ++i) {
    Sgemm(false, false, m, n, k, 1.0f, a_copy.data() + i * m * k, k, b_copy.data() + i * k * n, n,
          0.0f, c + i * m * n, n, ctx.pool, ctx.onednn);
  }
  if (!direct) {
    // c is laid out by c_order; read it in the output's order.
    std::vector<int64_t> strides(n_labels, 0);
    int64_t stride = 1;
    for (size_t d = c_order.size(); d-- > 0;) {
      strides[static_cast<size_t>(c_order[d])] = stride;
      stride *= plan.size[static_cast<size_t>(c_order[d])];
    }
    GatherByLabels(c, plan.output, strides, plan.size, out);
  }
  return true;
}

// out[output labels] = sum over the other labels of the product of every operand.
void DirectEinsum(const EinsumPlan& plan, const Inputs& inputs, float* out, int64_t out_count) {
  const size_t n_labels = plan.size.size();
  std::vector<int> summed;
  std::vector<bool> in_out(n_labels, false);
  for (int l : plan.output) in_out[static_cast<size_t>(l)] = true;
  for (size_t l = 0; l < n_labels; ++l) {
    if (plan.used[l] && !in_out[l]) summed.push_back(static_cast<int>(l));
  }
  // A sum over an empty range: zeros (the loop below would visit one combination).
  for (int l : summed) {
    if (plan.size[static_cast<size_t>(l)] == 0) {
      std::fill_n(out, out_count, 0.0f);
      return;
    }
  }
  std::vector<std::vector<int64_t>> strides;
  for (size_t i = 0; i < inputs.size(); ++i) {
    strides.push_back(LabelStrides(plan.operands[i], inputs[i]->shape(), n_labels));
  }
  std::vector<int64_t> out_index(plan.output.size(), 0), sum_index(summed.size(), 0);
  std::vector<int64_t> base(inputs.size(), 0);
  for (int64_t o = 0; o < out_count; ++o) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      base[i] = 0;
      for (size_t d = 0; d < plan.output.size(); ++d) {
        base[i] += out_index[d] * strides[i][static_cast<size_t>(plan.output[d])];
      }
    }
    double acc = 0;
    std::fill(sum_index.begin(), sum_index.end(), 0);
    for (bool more = true; more;) {
      double term = 1;
      for (size_t i = 0; i < inputs.size(); ++i) {
        int64_t offset = base[i];
        for (size_t s = 0; s < summed.size(); ++s) {
          offset += sum_index[s] * strides[i][static_cast<size_t>(summed[s])];
        }
        term *= inputs[i]->data<float>()[offset];
      }
      acc += term;
      more = false;
      for (size_t s = summed.size(); s-- > 0;) {
        if (++sum_index[s] < plan.size[static_cast<size_t>(summed[s])]) {
          more = true;
          break;
        }
        sum_index[s] = 0;
      }
    }
    out[o] = static_cast<float>(acc);
    for (size_t d = plan.output.size(); d-- > 0;) {
      if (++out_index[d] < plan.size[static_cast<size_t>(plan.output[d])]) break;
      out_index[d] = 0;
    }
  }
}

}  // namespace

Status CheckEinsum(const Node& node, const Graph&) {
  if (!node.attributes.Has("equation")) {
    return absl::InvalidArgumentError("Einsum needs an equation attribute");
  }
  if (node.inputs.empty()) return absl::InvalidArgumentError("Einsum needs at least one input");
  return absl::OkStatus();
}

Status RunEinsum(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(RequireInput(inputs, i, "Inputs", {DataType::kFp32}).status());
  }
  TESSERA_ASSIGN_OR_RETURN(EinsumPlan plan,
                           PlanEinsum(node.attributes.GetString("equation"), inputs));
  Shape out_shape;
  double elements = 1;
  for (int l : plan.output) {
    out_shape.push_back(plan.size[static_cast<size_t>(l)]);
    elements *= static_cast<double>(out_shape.back());
  }
  // The direct loop visits every label combination: bound it, since a hostile equation can ask
  // for an astronomically large one with small tensors.
  double combinations = 1;
  for (int64_t s : plan.size) combinations *= static_cast<double>(std::max<int64_t>(1, s));
  if (elements > static_cast<double>(int64_t{1} << 36)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the output ", ShapeToString(out_shape), " is too large"));
  }
  Value y = ctx.NewOutput(0, DataType::kFp32, out_shape);
  const int64_t out_count = ElementCount(out_shape);
  if (out_count > 0) {
    const bool gemm = inputs.size() == 2 &&
                      TryBatchedGemm(plan, *inputs[0], *inputs[1], y.mutable_data<float>(), ctx);
    if (!gemm) {
      if (combinations > static_cast<double>(int64_t{1} << 34)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "equation \"", node.attributes.GetString("equation"), "\" over these inputs needs ",
            combinations, " products, too many for the direct loop"));
      }
      DirectEinsum(plan, inputs, y.mutable_data<float>(), out_count);
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
