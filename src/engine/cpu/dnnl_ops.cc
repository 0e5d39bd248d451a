// Conv, ConvTranspose and sgemm through oneDNN; Convs on channels-last activations (value.h
// Layout). Pools: dnnl_pool_ops.cc.
//
// oneDNN's fast CPU convolutions (brgconv, jit) read and write NHWC or blocked layouts; on plain
// NCHW they fall back to im2col + GEMM, 2-2.5x slower on ResNet-18 (measured with oneDNN 2.6 on
// this project's AVX-512 CI machine). So a Conv here writes its output channels-last, and the CPU
// model keeps it that way through element-wise ops and pools until a row-major-only kernel reads
// it. Weights are reordered into the primitive's preferred layout once per (node, input shape)
// and kept in the node's KernelState with the primitive.
//
// oneDNN threads with OpenMP. Convs and sgemm run as single-threaded parts across the engine's
// pool (conv_slices.h); the rest set the calling thread's OpenMP team size to the engine's thread
// count for this model, so a partition's thread budget holds.
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/conv_slices.h"
#include "engine/cpu/dnnl_util.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

namespace {

// ---- Conv ------------------------------------------------------------------------------------

// One part of a Conv (conv_slices.h): a primitive over part of the images or rows.
struct ConvPart {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward primitive;
  memory weights;  // reordered constant weights (shared across shapes); empty for a runtime W
  int64_t src_offset = 0, dst_offset = 0, dst_count = 0;  // in floats
  // A channel part (SliceConvChannels) writes output channels [channel_begin, + channel_count)
  // to a dense temporary; 0 for image and row parts, which write the output itself.
  int64_t channel_begin = 0, channel_count = 0;
  // A part of a residual Conv cut to fit the cache (SliceResidualPointwiseConv): its residual is
  // read into the cache just before it runs.
  bool warm_residual = false;
};

// A Conv's primitives for one input shape and thread count: one part run on an OpenMP team of
// that many threads, or several single-threaded parts for the pool to run at once.
struct ConvEntry {
  std::vector<ConvPart> parts;
};

struct DeconvEntry {
  dnnl::deconvolution_forward::primitive_desc pd;
  dnnl::deconvolution_forward primitive;
  memory weights;  // as ConvEntry::weights
};

// A Conv's or ConvTranspose's primitives (Entry: ConvEntry or DeconvEntry) and reordered weights.
template <typename Entry>
class ConvState final : public KernelState {
 public:
  explicit ConvState(bool weights_constant) : weights_constant(weights_constant) {}

  // The constant weights reordered to `desc`, made on first request. Primitives for different
  // batch sizes usually want the same layout: they share one copy instead of one per shape.
  // `first_channel` tells apart channel parts (SliceConvChannels) of equal size.
  memory ReorderedWeights(const memory::desc& desc, memory user, int64_t first_channel = 0) {
    std::lock_guard<std::mutex> lock(weights_mu_);
    for (const auto& [key, m] : reordered_) {
      if (key.first == desc && key.second == first_channel) return m;
    }
    memory out(desc, CpuEngine());
    dnnl::reorder(user, out).execute(ThreadStream(), user, out);
    ThreadStream().wait();
    reordered_.emplace_back(std::make_pair(desc, first_channel), out);
    return out;
  }

  const bool weights_constant;
  PrimitiveCache<Entry> cache;

 private:
  std::mutex weights_mu_;
  std::vector<std::pair<std::pair<memory::desc, int64_t>, memory>> reordered_
      ABSL_GUARDED_BY(weights_mu_);
};

// W as the model stores it: `dims` (oneDNN's order) laid out as `tag`; from output channel
// `first_channel` on for a channel part.
memory UserWeights(const memory::dims& dims, Tag tag, const Value& wt, int64_t first_channel = 0) {
  const int64_t per_channel = wt.num_elements() / wt.dim(0);
  return memory(memory::desc(dims, memory::data_type::f32, tag), CpuEngine(),
                const_cast<float*>(wt.data<float>()) + first_channel * per_channel);
}

// A Conv's or ConvTranspose's primitive cache key: X's shape, the OpenMP team size (a primitive
// splits its work for the threads there were when it was made and runs that many whatever the
// team is later, so one is kept per size), and W's shape when W is not a constant.
std::vector<int64_t> PrimitiveKey(const Value& x, int threads, const Value& wt, bool constant_w) {
  std::vector<int64_t> key = x.shape();
  key.push_back(threads);
  if (!constant_w) key.insert(key.end(), wt.shape().begin(), wt.shape().end());
  return key;
}

// The weights a primitive runs with: `cached` (reordered once, ConvState::ReorderedWeights) for a
// constant W, else W reordered to `desc` now.
memory PrimitiveWeights(const memory& cached, const memory::desc& desc, bool constant_w,
                        const memory::dims& dims, Tag tag, const Value& wt, dnnl::stream& stream) {
  if (constant_w) return cached;
  memory user = UserWeights(dims, tag, wt);
  memory weights(desc, CpuEngine());
  dnnl::reorder(user, weights).execute(stream, user, weights);
  return weights;
}

// The bias argument: B from `first` on, or zeros (primitives are made with a bias descriptor, so
// that one serves a node with and without B).
memory BiasArgument(const memory::desc& desc, const Value* bias, int64_t count, int64_t first = 0) {
  if (bias != nullptr) {
    return memory(desc, CpuEngine(), const_cast<float*>(bias->data<float>()) + first);
  }
  thread_local std::vector<float> zeros;
  if (zeros.size() < static_cast<size_t>(count)) zeros.assign(count, 0.0f);
  return memory(desc, CpuEngine(), zeros.data());
}

// Output bytes of a residual Conv's parts (SliceResidualPointwiseConv): small enough that the
// residual read in just before stays in a core's L2 (1 MiB on the dev VM's AMD EPYC, 512 KiB on
// older ones) while the part runs.
constexpr int64_t kResidualPartBytes = 384 * 1024;

// Reads `count` floats, one per cache line, so that they are in the cache when a kernel that
// stalls on each miss reads them (the hardware prefetcher streams a plain read loop).
void ReadIntoCache(const float* data, int64_t count) {
  constexpr int64_t kLine = 64 / sizeof(float);
  float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 3 * kLine < count; i += 4 * kLine) {
    for (int k = 0; k < 4; ++k) sums[k] += data[i + k * kLine];
  }
  for (; i < count; i += kLine) sums[0] += data[i];
  volatile float keep = sums[0] + sums[1] + sums[2] + sums[3];
  (void)keep;
}

// The post-ops for a Conv fused by the graph passes: with `residual` (tessera_residual) a sum
// into the destination, which the caller fills with the residual first, then the activation
// (tessera_activation / tessera_clip_min / tessera_clip_max). A sum rather than a binary add of
// the residual tensor: with a per-element binary post-op oneDNN 2.6 leaves its brgconv kernels
// for jit ones, 3.7x slower on ResNet-50's 1x1 convolutions (12.3 against 3.35 ms).
dnnl::primitive_attr PostOpsAttr(const Node& node, bool residual) {
  dnnl::primitive_attr attr;
  const std::string activation = node.attributes.GetString("tessera_activation", "");
  dnnl::post_ops ops;
  if (residual) ops.append_sum(1.0f);
  if (activation == "Relu") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  } else if (activation == "Clip") {
    const float max = std::numeric_limits<float>::max();
    float lo = node.attributes.GetFloat("tessera_clip_min", -max);
    float hi = node.attributes.GetFloat("tessera_clip_max", max);
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, std::max(lo, -max),
                       std::min(hi, max));
  } else if (activation == "LeakyRelu") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu,
                       node.attributes.GetFloat("tessera_alpha", 0.01f), 0.0f);
  } else if (activation == "Sigmoid") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
  } else if (activation == "Tanh") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
  } else if (activation == "Swish") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);  // x * sigmoid(1 * x)
  }
  if (ops.len() > 0) attr.set_post_ops(ops);
  return attr;
}

}  // namespace

bool UsingOneDnn() { return true; }

void DnnlSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc, ThreadPool* pool) {
  // Arguments are checked by the callers (shapes) and dnnl_sgemm only fails on bad arguments.
  const int threads = pool != nullptr ? pool->usable_threads() : 1;
  // Parts of fewer rows or columns than this cost more in calls than the threads gain.
  constexpr int64_t kMinPart = 16;
  const bool by_rows = m >= n;
  const int64_t cut = by_rows ? m : n;
  if (threads < 2 || cut < threads * kMinPart) {
    omp_set_num_threads(threads);
    dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c,
               ldc);
    return;
  }
  if (m <= 2 && !trans_b && k >= threads * 64) {
    // A product of one or two rows (a Linear layer at batch 1) streams B once: each part takes
    // rows of B, which lie together, and adds its product to the others'. Parts by columns read
    // B's rows piecewise; 2048 x 1000 weights took 48 instead of 40 us a part on one thread.
    std::vector<float> partial(static_cast<size_t>((threads - 1) * m * n));
    pool->ParallelFor(threads, [&](int64_t t) {
      const int64_t begin = k * t / threads, end = k * (t + 1) / threads;
      float* out = t == 0 ? c : partial.data() + (t - 1) * m * n;
      omp_set_num_threads(1);
      dnnl_sgemm(trans_a ? 'T' : 'N', 'N', m, n, end - begin, alpha,
                 a + (trans_a ? begin * lda : begin), lda, b + begin * ldb, ldb,
                 t == 0 ? beta : 0.0f, out, t == 0 ? ldc : n);
    });
    for (int t = 1; t < threads; ++t) {
      const float* part = partial.data() + (t - 1) * m * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += part[i * n + j];
      }
    }
    return;
  }
  // Column parts start at multiples of 16 floats (a cache line) so no two share one of C's lines.
  const int64_t align = by_rows ? 1 : 16;
  pool->ParallelFor(threads, [&](int64_t t) {
    const int64_t begin = std::min(cut, (cut * t / threads + align - 1) / align * align);
    const int64_t end = t + 1 == threads
                            ? cut
                            : std::min(cut, (cut * (t + 1) / threads + align - 1) / align * align);
    if (begin >= end) return;
    omp_set_num_threads(1);
    if (by_rows) {  // rows of op(A) and of C
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', end - begin, n, k, alpha,
                 a + (trans_a ? begin : begin * lda), lda, b, ldb, beta, c + begin * ldc, ldc);
    } else {  // columns of op(B) and of C
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, end - begin, k, alpha, a, lda,
                 b + (trans_b ? begin * ldb : begin), ldb, beta, c + begin, ldc);
    }
  });
}

std::string OneDnnIsa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "other";
  }
}

std::unique_ptr<KernelState> MakeDnnlConvState(const Node& node, const Graph& graph) {
  const bool constant = node.inputs.size() > 1 && graph.IsConstant(node.inputs[1]);
  return std::make_unique<ConvState<ConvEntry>>(constant);
}

Status RunDnnlConv(const OpContext& ctx, const Node& node, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  if (inputs.empty() || inputs[0] == nullptr || inputs.size() < 2 || inputs[1] == nullptr ||
      inputs[0]->rank() != 4 || inputs[1]->rank() != 4 ||
      inputs[0]->dtype() != DataType::kFp32 || inputs[1]->dtype() != DataType::kFp32) {
    return RunReference(RunConv, ctx, node, inputs, outputs);  // it reports what is wrong
  }
  const Value& x_in = *inputs[0];
  const Value& wt = *inputs[1];
  const Value* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  const int64_t batch = x_in.dim(0), cin = x_in.dim(1), h = x_in.dim(2), w = x_in.dim(3);
  const int64_t cout = wt.dim(0), kh = wt.dim(2), kw = wt.dim(3);
  const int64_t groups = node.attributes.GetInt("group", 1);
  std::vector<int64_t> kernel_shape = node.attributes.GetInts("kernel_shape");
  const Value* residual = inputs.size() > 3 ? inputs[3] : nullptr;
  const bool shapes_ok =
      (residual != nullptr) == node.attributes.Has("tessera_residual") &&
      groups >= 1 && cin % groups == 0 && cout % groups == 0 && wt.dim(1) * groups == cin &&
      (kernel_shape.empty() || kernel_shape == std::vector<int64_t>{kh, kw}) &&
      (bias == nullptr || (bias->dtype() == DataType::kFp32 && bias->rank() == 1 &&
                           bias->dim(0) == cout));
  if (!shapes_ok) return RunReference(RunConv, ctx, node, inputs, outputs);
  TESSERA_ASSIGN_OR_RETURN(Window2d win, ResolveWindow(node, 2, h, w, kh, kw));
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, WindowOutputSize(h, kh, win.stride_h, win.dilation_h,
                                                        win.pad_top, win.pad_bottom, false));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, WindowOutputSize(w, kw, win.stride_w, win.dilation_w,
                                                        win.pad_left, win.pad_right, false));
  if (residual != nullptr && (residual->dtype() != DataType::kFp32 ||
                              residual->shape() != Shape{batch, cout, oh, ow})) {
    return RunReference(RunConv, ctx, node, inputs, outputs);  // it reports the mismatch
  }

  auto* state = static_cast<ConvState<ConvEntry>*>(ctx.state);
  const bool cache_weights = state != nullptr && state->weights_constant;
  const memory::dims weight_dims =
      groups == 1 ? Dims({cout, cin, kh, kw}) : Dims({groups, cout / groups, cin / groups, kh, kw});
  const Tag weight_tag = groups == 1 ? Tag::oihw : Tag::goihw;
  const int threads = ctx.pool != nullptr ? ctx.pool->usable_threads() : 1;
  ConvGeometry geometry = GeometryOf(batch, h, w, oh, ow, win);
  // Channel parts need the weights reordered per part once: only for a constant W.
  const std::vector<ChannelSlice> channel_slices =
      groups == 1 && cache_weights ? SliceConvChannels(geometry, cin, cout, threads)
                                   : std::vector<ChannelSlice>{};
  // A part's primitive: `images` images of in_rows x in_w input pixels (with pad_top and
  // pad_bottom rows of padding) to out_rows x out_w pixels of `channels` output channels, with W
  // of `part_weight_dims`. The caller sets the weights and offsets.
  auto make_part = [&](int64_t images, int64_t in_rows, int64_t in_w, int64_t out_rows,
                       int64_t out_w, int64_t channels, int64_t pad_top, int64_t pad_bottom,
                       const memory::dims& part_weight_dims) {
    memory::desc src_md(Dims({images, cin, in_rows, in_w}), memory::data_type::f32, Tag::nhwc);
    memory::desc weights_md(part_weight_dims, memory::data_type::f32, Tag::any);
    memory::desc bias_md(Dims({channels}), memory::data_type::f32, Tag::x);
    memory::desc dst_md(Dims({images, channels, out_rows, out_w}), memory::data_type::f32,
                        Tag::nhwc);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, weights_md,
        bias_md, dst_md, Dims({win.stride_h, win.stride_w}),
        Dims({win.dilation_h - 1, win.dilation_w - 1}), Dims({pad_top, win.pad_left}),
        Dims({pad_bottom, win.pad_right}));
    ConvPart part;
    part.pd = dnnl::convolution_forward::primitive_desc(
        desc, WithUserScratchpad(PostOpsAttr(node, residual != nullptr)), CpuEngine());
    part.primitive = dnnl::convolution_forward(part.pd);
    return part;
  };
  auto build = [&]() -> StatusOr<std::shared_ptr<const ConvEntry>> {
    auto entry = std::make_shared<ConvEntry>();
    if (!channel_slices.empty()) {
      omp_set_num_threads(1);  // a primitive splits its work for the team there is when made
      for (const ChannelSlice& c : channel_slices) {
        const memory::dims dims = Dims({c.count, cin, kh, kw});
        ConvPart part = make_part(batch, h, w, oh, ow, c.count, win.pad_top, win.pad_bottom, dims);
        part.weights = state->ReorderedWeights(part.pd.weights_desc(),
                                               UserWeights(dims, Tag::oihw, wt, c.begin), c.begin);
        part.dst_count = batch * oh * ow * c.count;
        part.channel_begin = c.begin;
        part.channel_count = c.count;
        entry->parts.push_back(std::move(part));
      }
      return std::shared_ptr<const ConvEntry>(std::move(entry));
    }
    std::vector<ConvSlice> slices;
    if (residual != nullptr) {
      slices = SliceResidualPointwiseConv(geometry, cout, threads, kResidualPartBytes);
    }
    const bool warm_residual = !slices.empty();
    if (slices.empty()) slices = SliceConv(geometry, threads);
    // A primitive splits its work for the OpenMP team there is when it is made.
    omp_set_num_threads(slices.size() > 1 ? 1 : threads);
    std::map<int64_t, ConvPart> made;  // residual parts of one size share a primitive
    for (const ConvSlice& slice : slices) {
      auto same = warm_residual ? made.find(slice.out_rows) : made.end();
      ConvPart part = same != made.end()
                          ? same->second
                          : make_part(slice.images, slice.in_rows, slice.w, slice.out_rows,
                                      slice.ow, cout, slice.pad_top, slice.pad_bottom, weight_dims);
      if (cache_weights) {
        part.weights = state->ReorderedWeights(part.pd.weights_desc(),
                                               UserWeights(weight_dims, weight_tag, wt));
      }
      if (warm_residual) made.emplace(slice.out_rows, part);
      part.warm_residual = warm_residual;
      part.src_offset = (slice.image * slice.h + slice.in_row) * slice.w * cin;
      part.dst_offset = (slice.image * slice.oh + slice.out_row) * slice.ow * cout;
      part.dst_count = slice.images * slice.out_rows * slice.ow * cout;
      entry->parts.push_back(std::move(part));
    }
    return std::shared_ptr<const ConvEntry>(std::move(entry));
  };

  try {
    const std::vector<int64_t> key = PrimitiveKey(x_in, threads, wt, cache_weights);
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const ConvEntry> entry,
                             state != nullptr ? state->cache.Get(key, build) : build());
    const Value x = ToChannelsLast(x_in, ctx.pool);
    Value y = ctx.NewOutput(0, DataType::kFp32, {batch, cout, oh, ow});
    Value residual_nhwc;
    if (residual != nullptr) {
      residual_nhwc = residual->channels_last() ? *residual : ToChannelsLast(*residual, ctx.pool);
    }
    const std::string error = RunParts(ctx, entry->parts.size(), threads, [&](size_t i) {
      const ConvPart& part = entry->parts[i];
      dnnl::stream& stream = ThreadStream();
      const bool channel_part = part.channel_count > 0;
      const int64_t pixels = batch * oh * ow;
      float* dst = channel_part ? ThreadPartBuffer(part.dst_count)
                                : y.mutable_data<float>() + part.dst_offset;
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, memory(part.pd.src_desc(), CpuEngine(),
                                const_cast<float*>(x.data<float>()) + part.src_offset)},
          {DNNL_ARG_WEIGHTS, PrimitiveWeights(part.weights, part.pd.weights_desc(), cache_weights,
                                              weight_dims, weight_tag, wt, stream)},
          {DNNL_ARG_BIAS,
           BiasArgument(part.pd.bias_desc(), bias, channel_part ? part.channel_count : cout,
                        part.channel_begin)},
          {DNNL_ARG_DST, memory(part.pd.dst_desc(), CpuEngine(), dst)},
          {DNNL_ARG_SCRATCHPAD, ThreadScratchpad(part.pd.scratchpad_desc())}};
      if (residual != nullptr && channel_part) {
        GatherChannels(residual_nhwc.data<float>(), pixels, cout, part.channel_begin,
                       part.channel_count, dst);
      } else if (residual != nullptr && residual_nhwc.raw() != y.raw()) {
        // Not when the output was planned into the residual's bytes (OpDef::in_place_input):
        // they are already there. On ResNet-50's first stage the copy cost as much as the Conv.
        std::memcpy(dst, residual_nhwc.data<float>() + part.dst_offset,
                    static_cast<size_t>(part.dst_count) * sizeof(float));
      } else if (residual != nullptr && part.warm_residual) {
        ReadIntoCache(dst, part.dst_count);
      }
      part.primitive.execute(stream, args);
      stream.wait();
      if (channel_part) {
        ScatterChannels(dst, pixels, part.channel_count, y.mutable_data<float>(), cout,
                        part.channel_begin);
      }
    });
    if (!error.empty()) {
      return absl::InternalError(absl::StrCat("oneDNN convolution failed: ", error));
    }
    (*outputs)[0] = y.WithLayout(Layout::kChannelsLast);
    return absl::OkStatus();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN convolution failed: ", e.what()));
  }
}

// ---- ConvTranspose ---------------------------------------------------------------------------

std::unique_ptr<KernelState> MakeDnnlConvTransposeState(const Node& node, const Graph& graph) {
  const bool constant = node.inputs.size() > 1 && graph.IsConstant(node.inputs[1]);
  return std::make_unique<ConvState<DeconvEntry>>(constant);
}

Status RunDnnlConvTranspose(const OpContext& ctx, const Node& node, const Inputs& inputs,
                            std::vector<Value>* outputs) {
  if (inputs.size() < 2 || inputs[0] == nullptr || inputs[1] == nullptr || inputs[0]->rank() != 4 ||
      inputs[1]->rank() != 4 || inputs[0]->dtype() != DataType::kFp32 ||
      inputs[1]->dtype() != DataType::kFp32) {
    return RunReference(RunConvTranspose, ctx, node, inputs, outputs);  // it reports what is wrong
  }
  const Value& x_in = *inputs[0];
  const Value& wt = *inputs[1];
  const Value* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  const int64_t batch = x_in.dim(0), cin = x_in.dim(1);
  const int64_t groups = node.attributes.GetInt("group", 1);
  const int64_t cout = wt.dim(1) * groups, kh = wt.dim(2), kw = wt.dim(3);
  if (groups < 1 || cin % groups != 0 || wt.dim(0) != cin ||
      (bias != nullptr &&
       (bias->dtype() != DataType::kFp32 || bias->rank() != 1 || bias->dim(0) != cout))) {
    return RunReference(RunConvTranspose, ctx, node, inputs, outputs);
  }
  TESSERA_ASSIGN_OR_RETURN(TransposeGeometry g,
                           ResolveConvTransposeGeometry(node, x_in.shape(), wt.shape()));
  // oneDNN takes the end pads that make the output size; output_padding or an output_shape past
  // the natural size would need negative ones, which it refuses.
  int64_t pad_end[2];
  for (int d = 0; d < 2; ++d) {
    pad_end[d] = (g.in[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d] + 1 - g.out[d] -
                 g.pad_begin[d];
    if (pad_end[d] < 0 || g.pad_begin[d] < 0 || g.out[d] > (int64_t{1} << 20)) {
      return RunReference(RunConvTranspose, ctx, node, inputs, outputs);
    }
  }
  const int64_t oh = g.out[0], ow = g.out[1];
  auto* state = static_cast<ConvState<DeconvEntry>*>(ctx.state);
  const bool cache_weights = state != nullptr && state->weights_constant;
  // ONNX's W is [C_in, C_out / group, kH, kW]: oneDNN's (g)oihw dims stored as (g)iohw.
  const memory::dims weight_dims =
      groups == 1 ? Dims({cout, cin, kh, kw}) : Dims({groups, cout / groups, cin / groups, kh, kw});
  const Tag weight_tag = groups == 1 ? Tag::iohw : Tag::giohw;
  if (groups == 1 && g.kernel == g.stride && g.dilation == std::vector<int64_t>{1, 1} &&
      g.pad_begin == std::vector<int64_t>{0, 0} && pad_end[0] == 0 && pad_end[1] == 0) {
    // Kernel = stride (U-Net's 2x2 stride-2 upsampling): every output pixel comes from exactly
    // one input pixel and kernel offset, so the whole layer is one GEMM of the channels-last
    // pixels [N*H*W, C_in] by W as [C_in, kH*kW*C_out], whose rows then land as kH runs of
    // kW*C_out values in the channels-last output. oneDNN's deconvolution took 3.7x longer on
    // unet_tiny's (bench/results/2026-11-24-engine-cpu-channels-last-decoder.md).
    try {
      SetThreads(ctx);
      const memory::desc patch_desc(weight_dims, memory::data_type::f32, Tag::ihwo);
      const memory patch = cache_weights ? state->ReorderedWeights(
                                               patch_desc, UserWeights(weight_dims, weight_tag, wt))
                                         : PrimitiveWeights({}, patch_desc, false, weight_dims,
                                                            weight_tag, wt, ThreadStream());
      ThreadStream().wait();
      const Value x = ToChannelsLast(x_in);
      const int64_t pixels = batch * g.in[0] * g.in[1], patch_len = kh * kw * cout;
      thread_local std::vector<float> products;
      products.resize(static_cast<size_t>(pixels * patch_len));
      Sgemm(false, false, pixels, patch_len, cin, 1.0f, x.data<float>(), cin,
            static_cast<const float*>(patch.get_data_handle()), patch_len, 0.0f, products.data(),
            patch_len, ctx.pool, ctx.onednn);
      Value y = ctx.NewOutput(0, DataType::kFp32, {batch, cout, oh, ow});
      float* out = y.mutable_data<float>();
      const float* product = products.data();  // the pool's workers have their own thread_local
      const int64_t run = kw * cout, in_w = g.in[1];
      std::vector<float> run_bias(static_cast<size_t>(run), 0.0f);  // the bias of each run value
      for (int64_t e = 0; bias != nullptr && e < run; ++e)
        run_bias[e] = bias->data<float>()[e % cout];
      // A task per input row (n, h): kH output rows of W runs each.
      ParallelFor(ctx.pool, batch * g.in[0], [&](int64_t row) {
        for (int64_t w = 0; w < in_w; ++w) {
          const float* src = product + (row * in_w + w) * patch_len;
          for (int64_t i = 0; i < kh; ++i, src += run) {
            float* dst = out + ((row * kh + i) * ow + w * kw) * cout;
            for (int64_t e = 0; e < run; ++e) dst[e] = src[e] + run_bias[e];
          }
        }
      });
      (*outputs)[0] = y.WithLayout(Layout::kChannelsLast);
      return absl::OkStatus();
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat("oneDNN weight reorder failed: ", e.what()));
    }
  }
  auto build = [&]() -> StatusOr<std::shared_ptr<const DeconvEntry>> {
    memory::desc src_md(Dims({batch, cin, g.in[0], g.in[1]}), memory::data_type::f32, Tag::nhwc);
    memory::desc weights_md(weight_dims, memory::data_type::f32, Tag::any);
    memory::desc bias_md(Dims({cout}), memory::data_type::f32, Tag::x);
    memory::desc dst_md(Dims({batch, cout, oh, ow}), memory::data_type::f32, Tag::nhwc);
    dnnl::deconvolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src_md,
        weights_md, bias_md, dst_md, Dims({g.stride[0], g.stride[1]}),
        Dims({g.dilation[0] - 1, g.dilation[1] - 1}), Dims({g.pad_begin[0], g.pad_begin[1]}),
        Dims({pad_end[0], pad_end[1]}));
    auto entry = std::make_shared<DeconvEntry>();
    entry->pd =
        dnnl::deconvolution_forward::primitive_desc(desc, WithUserScratchpad({}), CpuEngine());
    entry->primitive = dnnl::deconvolution_forward(entry->pd);
    if (cache_weights) {
      entry->weights = state->ReorderedWeights(entry->pd.weights_desc(),
                                               UserWeights(weight_dims, weight_tag, wt));
    }
    return std::shared_ptr<const DeconvEntry>(std::move(entry));
  };
  try {
    const std::vector<int64_t> key = PrimitiveKey(x_in, SetThreads(ctx), wt, cache_weights);
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const DeconvEntry> entry,
                             state != nullptr ? state->cache.Get(key, build) : build());
    const Value x = ToChannelsLast(x_in);
    Value y = ctx.NewOutput(0, DataType::kFp32, {batch, cout, oh, ow});
    dnnl::stream& stream = ThreadStream();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC,
         memory(entry->pd.src_desc(), CpuEngine(), const_cast<float*>(x.data<float>()))},
        {DNNL_ARG_WEIGHTS, PrimitiveWeights(entry->weights, entry->pd.weights_desc(), cache_weights,
                                            weight_dims, weight_tag, wt, stream)},
        {DNNL_ARG_BIAS, BiasArgument(entry->pd.bias_desc(), bias, cout)},
        {DNNL_ARG_DST, memory(entry->pd.dst_desc(), CpuEngine(), y.mutable_data<float>())},
        {DNNL_ARG_SCRATCHPAD, ThreadScratchpad(entry->pd.scratchpad_desc())}};
    entry->primitive.execute(stream, args);
    stream.wait();
    (*outputs)[0] = y.WithLayout(Layout::kChannelsLast);
    return absl::OkStatus();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN deconvolution failed: ", e.what()));
  }
}

}  // namespace tessera::engine::cpu
