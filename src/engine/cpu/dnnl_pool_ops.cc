// MaxPool, AveragePool and GlobalAveragePool on channels-last activations through oneDNN, cut
// into parts across the engine's pool like Convs (conv_slices.h).
#include <omp.h>

#include <algorithm>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/conv_slices.h"
#include "engine/cpu/dnnl_util.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

namespace {

// One part of a pool (conv_slices.h) and its primitive.
struct PoolPart {
  dnnl::pooling_v2_forward::primitive_desc pd;
  dnnl::pooling_v2_forward primitive;
  int64_t src_offset = 0, dst_offset = 0;  // in floats
};

// A pool's primitives for one input shape and thread count. Kept in the node's state because
// making a primitive descriptor costs microseconds even when oneDNN's own cache has it: more than
// the whole pool on LeNet's small maps.
struct PoolEntry {
  std::vector<PoolPart> parts;
};

Status RunDnnlPool(dnnl::algorithm algorithm, KernelFn reference, const OpContext& ctx,
                   const Node& node, const Inputs& inputs, std::vector<Value>* outputs) {
  const std::vector<int64_t> kernel = node.attributes.GetInts("kernel_shape");
  if (inputs.empty() || inputs[0] == nullptr || !inputs[0]->channels_last() ||
      inputs[0]->dtype() != DataType::kFp32 || kernel.size() != 2) {
    return RunReference(reference, ctx, node, inputs, outputs);
  }
  const Value& x = *inputs[0];
  const int64_t batch = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  TESSERA_ASSIGN_OR_RETURN(Window2d win, ResolveWindow(node, 2, h, w, kernel[0], kernel[1]));
  const bool ceil_mode = node.attributes.GetInt("ceil_mode", 0) != 0;
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, WindowOutputSize(h, kernel[0], win.stride_h, win.dilation_h,
                                                        win.pad_top, win.pad_bottom, ceil_mode));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, WindowOutputSize(w, kernel[1], win.stride_w, win.dilation_w,
                                                        win.pad_left, win.pad_right, ceil_mode));
  // oneDNN derives the output size from the padding: the end padding that ceil mode implies.
  const int64_t pad_bottom =
      (oh - 1) * win.stride_h + (kernel[0] - 1) * win.dilation_h + 1 - h - win.pad_top;
  const int64_t pad_right =
      (ow - 1) * win.stride_w + (kernel[1] - 1) * win.dilation_w + 1 - w - win.pad_left;
  const bool extra_padding = pad_bottom != win.pad_bottom || pad_right != win.pad_right;
  if (pad_bottom < 0 || pad_right < 0 ||
      (algorithm == dnnl::algorithm::pooling_avg_include_padding && extra_padding)) {
    // ONNX counts only the declared pads in an include-pad average; oneDNN would count all.
    return RunReference(reference, ctx, node, inputs, outputs);
  }
  const int threads = ctx.pool != nullptr ? ctx.pool->usable_threads() : 1;
  const ConvGeometry geometry{batch,
                              h,
                              w,
                              oh,
                              ow,
                              kernel[0],
                              kernel[1],
                              win.stride_h,
                              win.stride_w,
                              win.dilation_h,
                              win.dilation_w,
                              win.pad_top,
                              pad_bottom,
                              win.pad_left,
                              pad_right};
  auto build = [&]() -> StatusOr<std::shared_ptr<const PoolEntry>> {
    auto entry = std::make_shared<PoolEntry>();
    const std::vector<ConvSlice> slices = SliceConv(geometry, threads);
    // A primitive splits its work for the OpenMP team there is when it is made.
    omp_set_num_threads(slices.size() > 1 ? 1 : threads);
    for (const ConvSlice& slice : slices) {
      memory::desc src_md(Dims({slice.images, c, slice.in_rows, slice.w}), memory::data_type::f32,
                          Tag::nhwc);
      memory::desc dst_md(Dims({slice.images, c, slice.out_rows, slice.ow}), memory::data_type::f32,
                          Tag::nhwc);
      dnnl::pooling_v2_forward::desc desc(
          dnnl::prop_kind::forward_inference, algorithm, src_md, dst_md,
          Dims({win.stride_h, win.stride_w}), Dims({kernel[0], kernel[1]}),
          Dims({win.dilation_h - 1, win.dilation_w - 1}), Dims({slice.pad_top, win.pad_left}),
          Dims({slice.pad_bottom, pad_right}));
      PoolPart part;
      part.pd = dnnl::pooling_v2_forward::primitive_desc(desc, WithUserScratchpad({}), CpuEngine());
      part.primitive = dnnl::pooling_v2_forward(part.pd);
      part.src_offset = (slice.image * slice.h + slice.in_row) * slice.w * c;
      part.dst_offset = (slice.image * slice.oh + slice.out_row) * slice.ow * c;
      entry->parts.push_back(std::move(part));
    }
    return std::shared_ptr<const PoolEntry>(std::move(entry));
  };
  try {
    auto* cache = static_cast<PrimitiveCache<PoolEntry>*>(ctx.state);
    std::vector<int64_t> key = x.shape();
    key.push_back(threads);
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const PoolEntry> entry,
                             cache != nullptr ? cache->Get(key, build) : build());
    Value y = ctx.NewOutput(0, DataType::kFp32, {batch, c, oh, ow});
    const std::string error = RunParts(ctx, entry->parts.size(), threads, [&](size_t i) {
      const PoolPart& part = entry->parts[i];
      dnnl::stream& stream = ThreadStream();
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, memory(part.pd.src_desc(), CpuEngine(),
                                const_cast<float*>(x.data<float>()) + part.src_offset)},
          {DNNL_ARG_DST,
           memory(part.pd.dst_desc(), CpuEngine(), y.mutable_data<float>() + part.dst_offset)},
          {DNNL_ARG_SCRATCHPAD, ThreadScratchpad(part.pd.scratchpad_desc())}};
      if (part.pd.workspace_desc().get_size() != 0) {
        args[DNNL_ARG_WORKSPACE] = memory(part.pd.workspace_desc(), CpuEngine());
      }
      part.primitive.execute(stream, args);
      stream.wait();
    });
    if (!error.empty()) return absl::InternalError(absl::StrCat("oneDNN pooling failed: ", error));
    (*outputs)[0] = y.WithLayout(Layout::kChannelsLast);
    return absl::OkStatus();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN pooling failed: ", e.what()));
  }
}

}  // namespace

std::unique_ptr<KernelState> MakeDnnlPoolState(const Node&, const Graph&) {
  return std::make_unique<PrimitiveCache<PoolEntry>>();
}

Status RunDnnlMaxPool(const OpContext& ctx, const Node& node, const Inputs& inputs,
                      std::vector<Value>* outputs) {
  return RunDnnlPool(dnnl::algorithm::pooling_max, RunMaxPool, ctx, node, inputs, outputs);
}

Status RunDnnlAveragePool(const OpContext& ctx, const Node& node, const Inputs& inputs,
                          std::vector<Value>* outputs) {
  const bool include_pad = node.attributes.GetInt("count_include_pad", 0) != 0;
  return RunDnnlPool(include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                 : dnnl::algorithm::pooling_avg_exclude_padding,
                     RunAveragePool, ctx, node, inputs, outputs);
}

Status RunGlobalAveragePoolAnyLayout(const OpContext& ctx, const Node& node, const Inputs& inputs,
                                     std::vector<Value>* outputs) {
  if (inputs.empty() || inputs[0] == nullptr || !inputs[0]->channels_last() ||
      inputs[0]->dtype() != DataType::kFp32) {
    return RunReference(RunGlobalAveragePool, ctx, node, inputs, outputs);
  }
  const Value& x = *inputs[0];
  // [N, C, 1, 1] has the same bytes in both layouts: the output is plain row-major, the mean of
  // the stored [N, H, W, C] over H and W.
  Value y = ctx.NewOutput(0, DataType::kFp32, {x.dim(0), x.dim(1), 1, 1});
  ReduceMeanFp32(PhysicalView(x), {false, true, true, false}, y, ctx.pool);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
