#include "engine/cpu_layout_dispatch.h"

namespace tessera::engine {
namespace {

// Whether an element-wise kernel can run on these inputs in their channels-last bytes: every
// input with more than one element is channels-last and all have one shape (scalars broadcast
// the same in any layout).
bool ElementwiseOnChannelsLast(const cpu::Inputs& inputs) {
  const Shape* shape = nullptr;
  for (const Value* v : inputs) {
    if (v == nullptr || v->num_elements() <= 1) continue;
    if (!v->channels_last()) return false;
    if (shape != nullptr && v->shape() != *shape) return false;
    shape = &v->shape();
  }
  return shape != nullptr;
}

// A channels-last value whose H and W are 1 has the bytes of its row-major form (a gate made by a
// Conv is labelled channels-last), so only the others need their layout kept.
bool SpatiallyLarge(const Value& v) { return v.channels_last() && v.dim(2) * v.dim(3) > 1; }

// Whether an element-wise kernel can run on these inputs' bytes when some are channels-last and
// the others only vary per image and channel ([N or 1, C or 1, 1, 1], or fewer dims aligned to
// the right: a squeeze-excitation gate, a per-channel scale): the channels-last ones, all of one
// shape, are their [N, H, W, C] bytes, and each other one is the same bytes seen as
// [N or 1, 1, 1, C or 1], which broadcasts over those. Returns the channels-last shape.

const Shape* ChannelBroadcastOnChannelsLast(const cpu::Inputs& inputs) {
  const Shape* shape = nullptr;
  for (const Value* v : inputs) {
    if (v == nullptr || !SpatiallyLarge(*v)) continue;
    if (shape != nullptr && v->shape() != *shape) return nullptr;
    shape = &v->shape();
  }
  if (shape == nullptr) return nullptr;
  for (const Value* v : inputs) {
    if (v == nullptr || SpatiallyLarge(*v) || v->num_elements() <= 1) continue;
    if (v->rank() > 4 || v->rank() < 3) return nullptr;
    const int skip = 4 - v->rank();  // dims missing on the left count as 1
    for (int d = 0; d < 4; ++d) {
      const int64_t size = d < skip ? 1 : v->dim(d - skip);
      const bool fits = d >= 2 ? size == 1 : size == 1 || size == (*shape)[d];
      if (!fits) return nullptr;
    }
  }
  return shape;
}

}  // namespace

KernelLayout AdaptInputLayouts(cpu::LayoutSupport support, cpu::Inputs* inputs,
                               std::vector<Value>* storage, ThreadPool* pool) {
  KernelLayout layout;
  if (support == cpu::LayoutSupport::kAny) return layout;
  if (support == cpu::LayoutSupport::kElementwise) {
    if (ElementwiseOnChannelsLast(*inputs)) {
      layout.outputs_channels_last = true;
      return layout;
    }
    layout.broadcast_shape = ChannelBroadcastOnChannelsLast(*inputs);
    if (layout.broadcast_shape != nullptr) {
      storage->clear();
      storage->reserve(inputs->size());
      for (const Value*& v : *inputs) {
        if (v == nullptr || v->num_elements() <= 1) continue;
        if (SpatiallyLarge(*v)) {
          storage->push_back(cpu::PhysicalView(*v));
        } else {
          const int skip = 4 - v->rank();
          const int64_t images = skip > 0 ? 1 : v->dim(0), channels = v->dim(1 - skip);
          storage->push_back(v->WithLayout(Layout::kRowMajor).Reshaped({images, 1, 1, channels}));
        }
        v = &storage->back();
      }
      return layout;
    }
  }
  storage->clear();
  storage->reserve(inputs->size());
  for (const Value*& v : *inputs) {
    if (v == nullptr || !v->channels_last()) continue;
    storage->push_back(cpu::ToRowMajor(*v, pool));
    v = &storage->back();
  }
  return layout;
}

void LabelOutputLayouts(const KernelLayout& layout, std::vector<Value>* outputs) {
  for (Value& out : *outputs) {
    if (!out.defined()) continue;
    if (layout.broadcast_shape != nullptr) {
      out = out.Reshaped(*layout.broadcast_shape).WithLayout(Layout::kChannelsLast);
    } else if (layout.outputs_channels_last && out.rank() == 4) {
      out = out.WithLayout(Layout::kChannelsLast);
    }
  }
}

}  // namespace tessera::engine
